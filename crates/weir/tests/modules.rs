//! The built-in modules, through the `weir` binary: `add-headers`, `body-copy` and
//! `empty` on a running proxy, and `weir check` on `[[module]]` sections it refuses.

mod common;

use std::time::Duration;

use common::module_config::{reverse_with_modules, write_config};
use common::*;

/// A 1 MiB body.
const MIB: usize = 1 << 20;

#[tokio::test]
async fn add_headers_stamps_each_path() {
    let origin = TestOrigin::start();
    origin.route("/stamped", Reply::ok("stamped").cc("max-age=60"));
    origin.route("/post", Reply::ok("posted"));
    let proxy = reverse_with_modules(
        &origin.base(),
        "[[module]]\nname = \"add-headers\"\nvalue = \"stamp\"\n",
    );
    let client = direct_client();

    let miss = get(&client, &proxy.reverse_url("/stamped"), &[]).await;
    assert_eq!(miss.status, 200);
    assert_eq!(miss.text(), "stamped");
    let seen = origin.last("/stamped").unwrap();
    assert_eq!(seen.header_all("x-weir-in-1"), ["stamp"], "request headers");
    assert_eq!(
        seen.header_all("x-weir-in-2"),
        ["stamp"],
        "upstream request"
    );
    assert_eq!(
        miss.header_all("x-weir-out-1"),
        ["stamp"],
        "response headers"
    );
    assert_eq!(
        miss.header_all("x-weir-out-2"),
        ["stamp"],
        "deliver headers"
    );
    assert!(miss.header("x-weir-in-1").is_none() && miss.header("x-weir-in-2").is_none());

    // A hit: x-weir-out-1 was stored with the response; x-weir-out-2 is added on
    // each delivery and not stored (stored, it would now appear twice).
    for _ in 0..2 {
        let hit = get(&client, &proxy.reverse_url("/stamped"), &[]).await;
        assert!(is_hit(&hit.cache_status()), "{}", hit.cache_status());
        assert_eq!(hit.text(), "stamped");
        assert_eq!(hit.header_all("x-weir-out-1"), ["stamp"]);
        assert_eq!(hit.header_all("x-weir-out-2"), ["stamp"]);
    }
    assert_eq!(origin.count("/stamped"), 1);

    // A pass-through gets all four too.
    let posted = send(
        &client,
        "POST",
        &proxy.reverse_url("/post"),
        &[],
        Some(b"x".to_vec()),
    )
    .await;
    assert_eq!(posted.status, 200);
    let seen = origin.last("/post").unwrap();
    assert_eq!(seen.header_all("x-weir-in-1"), ["stamp"]);
    assert_eq!(seen.header_all("x-weir-in-2"), ["stamp"]);
    assert_eq!(posted.header_all("x-weir-out-1"), ["stamp"]);
    assert_eq!(posted.header_all("x-weir-out-2"), ["stamp"]);
}

#[tokio::test]
async fn body_copy_delivers_identical_bodies() {
    let origin = TestOrigin::start();
    origin.route("/small", Reply::ok("a small body").cc("max-age=60"));
    origin.route("/mib", Reply::stream(MIB as u64).cc("max-age=60"));
    origin.route(
        "/mib-chunked",
        Reply::stream(MIB as u64).chunked().cc("max-age=60"),
    );
    origin.route("/echo", Reply::echo());
    let proxy = reverse_with_modules(&origin.base(), "[[module]]\nname = \"body-copy\"\n");
    let client = direct_client();

    for (path, body) in [
        ("/small", b"a small body".to_vec()),
        ("/mib", pattern(MIB)),
        ("/mib-chunked", pattern(MIB)),
    ] {
        for round in ["miss", "hit"] {
            let r = get(&client, &proxy.reverse_url(path), &[]).await;
            assert_eq!(r.status, 200, "{path} {round}");
            assert_eq!(r.body.len(), body.len(), "{path} {round}: length");
            assert!(r.body == body, "{path} {round}: the bytes differ");
            assert_eq!(is_hit(&r.cache_status()), round == "hit", "{path} {round}");
            // The copy has the original's length: framing is left alone.
            if let Some(len) = r.header("content-length") {
                assert_eq!(len, body.len().to_string(), "{path} {round}");
            }
            if path != "/mib-chunked" {
                assert_eq!(
                    r.header("content-length"),
                    Some(body.len().to_string()),
                    "{path} {round}"
                );
            }
            assert_eq!(r.header_all("x-weir-out-1"), ["1"], "{path} {round}");
            assert_eq!(r.header_all("x-weir-out-2"), ["1"], "{path} {round}");
        }
        assert_eq!(origin.count(path), 1, "{path}");
    }

    // A pass-through body, both ways.
    let body = pattern(MIB);
    let r = send(
        &client,
        "POST",
        &proxy.reverse_url("/echo"),
        &[],
        Some(body.clone()),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(
        origin.last("/echo").unwrap().body == body,
        "the origin got other bytes"
    );
    assert!(r.body == body, "the client got other bytes");
}

#[tokio::test]
async fn empty_changes_nothing() {
    let origin = TestOrigin::start();
    origin.route(
        "/same",
        Reply::ok("the same")
            .cc("max-age=60")
            .header("etag", "\"same\""),
    );
    origin.route("/echo", Reply::echo());
    let with = reverse_with_modules(&origin.base(), "[[module]]\nname = \"empty\"\n");
    let without = Proxy::reverse(&origin.base());
    let client = direct_client();

    // Headers whose values differ between any two deliveries, or name the listener;
    // and the mark that names each process in the Via of requests toward the origin.
    let comparable = |headers: Vec<(String, String)>| -> Vec<(String, String)> {
        headers
            .into_iter()
            .filter(|(n, _)| !["date", "age", "host", "x-echo-host"].contains(&n.as_str()))
            .map(|(n, v)| match (n.as_str(), v.split_once(" (")) {
                ("via" | "x-echo-via", Some((entry, _))) => (n, entry.to_owned()),
                _ => (n, v),
            })
            .collect()
    };
    let response = |r: &Fetched| {
        comparable(
            r.headers
                .iter()
                .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
                .collect(),
        )
    };
    for round in ["miss", "hit"] {
        let a = get(&client, &with.reverse_url("/same"), &[]).await;
        let a_seen = origin.last("/same").unwrap();
        let b = get(&client, &without.reverse_url("/same"), &[]).await;
        let b_seen = origin.last("/same").unwrap();
        assert_eq!(a.status, b.status, "{round}");
        assert_eq!(a.body, b.body, "{round}");
        assert_eq!(response(&a), response(&b), "{round}: response headers");
        assert_eq!(is_hit(&a.cache_status()), round == "hit", "{round}");
        assert_eq!(
            comparable(a_seen.headers),
            comparable(b_seen.headers),
            "what the origin got"
        );
    }
    assert_eq!(origin.count("/same"), 2, "one miss per proxy");

    let body = pattern(100_000);
    let a = send(
        &client,
        "POST",
        &with.reverse_url("/echo"),
        &[],
        Some(body.clone()),
    )
    .await;
    let b = send(
        &client,
        "POST",
        &without.reverse_url("/echo"),
        &[],
        Some(body.clone()),
    )
    .await;
    assert!(a.body == body && b.body == body);
    assert_eq!(response(&a), response(&b), "pass-through response headers");
}

/// `weir check` and `weir run` on `text`: both exit 2 with a
/// `FILE:LINE: key `KEY`: ...` line; returns that line (from `check`).
fn refused(dir: &std::path::Path, name: &str, text: &str, line: usize, key: &str) -> String {
    let path = write_config(dir, name, text);
    let prefix = format!("weir: {}:{line}: key `{key}`: ", path.display());
    let mut found = String::new();
    for command in ["check", "run"] {
        let out = run_weir(
            &[command, "--config", path.to_str().unwrap()],
            Duration::from_secs(10),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{command} {name}; stderr:\n{stderr}"
        );
        found = stderr
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{command} {name}: no line {prefix:?} in stderr:\n{stderr}"))
            .to_string();
    }
    found
}

#[test]
fn check_refuses_unknown_modules_and_bad_settings() {
    let dir = temp_dir("check-modules");
    let listen = "[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\n\n";

    let line = refused(
        &dir,
        "unknown.toml",
        &format!("{listen}[[module]]\nname = \"no-such-module\"\n"),
        6,
        "module[0].name",
    );
    assert!(line.contains("no-such-module"), "{line}");
    for builtin in ["empty", "add-headers", "body-copy"] {
        assert!(
            line.contains(builtin),
            "the available modules are listed: {line}"
        );
    }

    // The second section is at fault: its index and the line of the key.
    let line = refused(
        &dir,
        "unknown-setting.toml",
        &format!(
            "{listen}[[module]]\nname = \"empty\"\n\n[[module]]\nname = \"add-headers\"\nvalue = \"1\"\nvaleu = \"2\"\n"
        ),
        11,
        "module[1].valeu",
    );
    assert!(!line.trim_end().ends_with(':'), "a message: {line}");

    // A value the module rejects.
    refused(
        &dir,
        "bad-value.toml",
        &format!("{listen}[[module]]\nname = \"body-copy\"\nvalue = \"a\\nb\"\n"),
        7,
        "module[0].value",
    );

    // `empty` takes no settings at all.
    refused(
        &dir,
        "empty-setting.toml",
        &format!("{listen}[[module]]\nname = \"empty\"\nlevel = 3\n"),
        7,
        "module[0].level",
    );

    let _ = std::fs::remove_dir_all(&dir);
}
