//! `weir check` on `[cluster]`.

use std::time::Duration;

use crate::common::*;

/// Writes `text` to `path` and runs `weir check` on it, which must refuse it; its report.
fn refused(path: &std::path::Path, text: &str) -> String {
    std::fs::write(path, text).unwrap();
    let out = run_weir(
        &["check", "--config", path.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert!(!out.status.success(), "{text} passed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn weir_check_names_the_cluster_key_at_fault() {
    let dir = temp_dir("cluster-check");
    let path = dir.join("weir.toml");
    let cases = [
        ("etcd = [\"127.0.0.1:2379\"]", "cluster.etcd[0]"),
        ("node = \"a b\"", "cluster.node"),
        ("lease = \"1.5s\"", "cluster.lease"),
        ("purge_ack_wait = \"1s\"", "cluster.purge_ack_wait"),
        ("local_copies = \"some\"", "cluster.local_copies"),
        ("peer_addr = \"127.0.0.1:3128\"", "cluster.peer_addr"),
    ];
    for (line, key) in cases {
        let mut fields = vec![
            ("etcd", "etcd = [\"http://127.0.0.1:2379\"]"),
            ("node", "node = \"a\""),
            ("lease", "lease = \"3s\""),
            ("purge_ack_wait", "purge_ack_wait = \"5s\""),
            ("local_copies", "local_copies = \"all\""),
            ("peer_addr", "peer_addr = \"127.0.0.1:7946\""),
        ];
        let name = line.split(' ').next().unwrap();
        fields.retain(|(n, _)| *n != name);
        let mut text = String::from("[cluster]\n");
        for (_, f) in &fields {
            text.push_str(f);
            text.push('\n');
        }
        text.push_str(line);
        text.push('\n');
        let err = refused(&path, &text);
        assert!(
            err.contains(&format!(":7: key `{key}`")),
            "{text}\n---\n{err}"
        );
    }
    std::fs::write(
        &path,
        "[cluster]\netcd = [\"http://127.0.0.1:2379\"]\nnode = \"a\"\npeer_addr = \"127.0.0.1:7946\"\n",
    )
    .unwrap();
    let out = run_weir(
        &["check", "--config", path.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn weir_check_names_the_etcd_credentials_at_fault() {
    let dir = TempDir::new("cluster-check-auth");
    let path = dir.path().join("weir.toml");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let missing = dir.path().join("missing");
    let base = "[cluster]\netcd = [\"http://127.0.0.1:2379\"]\nnode = \"a\"\npeer_addr = \"127.0.0.1:7946\"\n";
    let cases = [
        (
            "etcd_user = \"weir\"\n".to_string(),
            ":5: key `cluster.etcd_user`",
            "needs `etcd_password_file`",
        ),
        (
            format!("etcd_password_file = {:?}\n", empty.display().to_string()),
            ":5: key `cluster.etcd_password_file`",
            "needs `etcd_user`",
        ),
        (
            format!(
                "etcd_user = \"weir\"\netcd_password_file = {:?}\n",
                empty.display().to_string()
            ),
            ":6: key `cluster.etcd_password_file`",
            "holds no password",
        ),
        (
            format!(
                "etcd_user = \"weir\"\netcd_password_file = {:?}\n",
                missing.display().to_string()
            ),
            ":6: key `cluster.etcd_password_file`",
            "cannot read",
        ),
        (
            format!("etcd_ca_file = {:?}\n", missing.display().to_string()),
            ":5: key `cluster.etcd_ca_file`",
            "cannot read",
        ),
    ];
    for (lines, key, why) in cases {
        let text = format!("{base}{lines}");
        let err = refused(&path, &text);
        assert!(err.contains(key) && err.contains(why), "{text}\n---\n{err}");
    }
}
