//! `weir-bench polymix` end to end: a short run through Weir started from the built
//! binary, whose report must agree with the origin's own counts; and the bad cases (an
//! unreachable proxy, a proxy that answers garbage, Ctrl-C), which must end quickly
//! with a clear message and a partial report.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;

use common::{completed, finish, report, weir_binary, BENCH};

fn temp_dir(tag: &str) -> PathBuf {
    common::temp_dir("polymix", tag)
}

fn spawn(args: &[&str], out: &Path) -> Child {
    Command::new(BENCH)
        .arg("polymix")
        .args(args)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start weir-bench")
}

fn n(v: &Value, path: &str) -> u64 {
    path.split('.')
        .fold(v, |v, k| &v[k])
        .as_u64()
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

#[test]
fn a_short_run_through_weir_agrees_with_the_origin() {
    let out = temp_dir("weir");
    let weir = weir_binary();
    let child = spawn(
        &[
            "--weir",
            "--weir-binary",
            weir.to_str().unwrap(),
            "--rate",
            "60",
            "--fill-secs",
            "1",
            "--plateau-secs",
            "3",
            "--servers",
            "4",
            "--max-secs",
            "15",
        ],
        &out,
    );
    let r = completed(child, &out, Duration::from_secs(40));
    let w = &r["whole"];
    let sent = n(w, "sent");
    assert!(sent > 100, "{sent} requests sent");
    assert_eq!(n(w, "errors"), 0, "{}", r["errors"]);
    let (hits, collapsed, validations, misses) = (
        n(w, "outcomes.hit"),
        n(w, "outcomes.collapsed"),
        n(w, "outcomes.validation"),
        n(w, "outcomes.miss"),
    );
    assert_eq!(n(w, "outcomes.unlabelled"), 0, "Weir labels every answer");
    assert_eq!(hits + collapsed + validations + misses, n(w, "ok"));
    // Every miss and every validation is one origin request; hits are none.
    assert_eq!(
        n(w, "origin.requests"),
        misses + validations,
        "origin {} vs misses {misses} + validations {validations}",
        w["origin"]
    );
    assert!(n(w, "origin.not_modified") <= validations);
    // The origin's serial numbers tell stored copies apart without the proxy's word.
    assert_eq!(n(w, "stored_copies_by_serial"), hits + collapsed);
    // Bytes: whatever the client got that the origin did not send came from the cache.
    assert!(n(w, "bytes") >= n(w, "origin.body_bytes"));
    let hit_ratio = w["hit_ratio"].as_f64().unwrap();
    let ideal = r["ideal_hit_ratio"].as_f64().unwrap();
    assert!(
        hit_ratio > 0.25 && hit_ratio <= ideal + 0.05,
        "hit ratio {hit_ratio}, ideal {ideal}"
    );
    assert!(w["requests_per_cpu_second"].as_f64().unwrap() > 0.0);
    assert!(
        w["latency"]["hits"]["p50_ms"].as_f64() < w["latency"]["misses"]["p50_ms"].as_f64(),
        "{}",
        w["latency"]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("hit ratio by request"), "{md}");
    let svg = std::fs::read_to_string(out.join("polymix.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("<polyline"),
        "{svg}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// A base port with `n` free ports from it on (free when looked at). Taken below
/// Linux's ephemeral range (32768 on), where the ports that other tests running at the
/// same time get from the kernel (and the one the unreachable-proxy test expects to
/// stay closed) are not.
fn free_port_range(n: u16) -> u16 {
    let seed = std::process::id() as u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as u64;
    for i in 0..200u64 {
        let base = 20_000 + ((seed.wrapping_mul(2654435761) + i * 97) % 12_000) as u16;
        if (base..base + n).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return base;
        }
    }
    panic!("no {n} consecutive free ports");
}

#[test]
fn a_reverse_run_routes_each_virtual_host_to_its_fixed_port() {
    let out = temp_dir("reverse");
    let weir = weir_binary();
    let base = free_port_range(4);
    let child = spawn(
        &[
            "--weir",
            "--weir-binary",
            weir.to_str().unwrap(),
            "--reverse",
            "--origin-base-port",
            &base.to_string(),
            "--rate",
            "60",
            "--fill-secs",
            "1",
            "--plateau-secs",
            "2",
            "--servers",
            "4",
            "--max-secs",
            "15",
        ],
        &out,
    );
    let r = completed(child, &out, Duration::from_secs(40));
    assert!(
        r["proxy"].as_str().unwrap().contains("reverse"),
        "{}",
        r["proxy"]
    );
    let w = &r["whole"];
    assert!(n(w, "sent") > 80, "{}", w["sent"]);
    assert_eq!(n(w, "errors"), 0, "{}", r["errors"]);
    // A request routed to the wrong server would be a 404 counted here.
    assert_eq!(n(&r, "origin_unknown_requests"), 0);
    assert_eq!(
        n(w, "origin.requests"),
        n(w, "outcomes.miss") + n(w, "outcomes.validation")
    );
    assert!(n(w, "outcomes.hit") > 0, "{}", w["outcomes"]);
    // Weir's config names the fixed ports it was given.
    let config = std::fs::read_to_string(out.join("weir.toml")).unwrap();
    for (i, port) in (base..base + 4).enumerate() {
        assert!(
            config.contains(&format!(
                "host = \"s{i}.polymix.test\"\norigin = \"http://127.0.0.1:{port}\""
            )),
            "{config}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn an_origin_base_port_out_of_range_is_refused() {
    let out = temp_dir("ports");
    let child = spawn(
        &[
            "--proxy",
            "127.0.0.1:9",
            "--origin-base-port",
            "65530",
            "--reverse",
        ],
        &out,
    );
    let (output, took) = finish(child, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("--origin-base-port 65530"), "{stderr}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn an_unreachable_proxy_stops_at_once_with_a_report() {
    let out = temp_dir("unreachable");
    // A port just released: nothing listens there.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let child = spawn(
        &["--proxy", &addr.to_string(), "--plateau-secs", "60"],
        &out,
    );
    let (output, took) = finish(child, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("cannot connect to the proxy"), "{stderr}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let r = report(&out);
    assert!(r["status"].as_str().unwrap().contains("cannot connect"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_proxy_answering_garbage_is_given_up_on() {
    let out = temp_dir("garbage");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"this is not HTTP\r\n\r\n");
        }
    });
    let child = spawn(
        &[
            "--proxy",
            &addr.to_string(),
            "--rate",
            "20",
            "--plateau-secs",
            "60",
        ],
        &out,
    );
    let (output, took) = finish(child, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("answered none"), "{stderr}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    let r = report(&out);
    assert!(n(&r["whole"], "errors") >= 10);
    assert_eq!(n(&r["whole"], "ok"), 0);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn ctrl_c_ends_the_run_with_a_partial_report() {
    let out = temp_dir("interrupt");
    let weir = weir_binary();
    let child = spawn(
        &[
            "--weir",
            "--weir-binary",
            weir.to_str().unwrap(),
            "--rate",
            "30",
            "--fill-secs",
            "1",
            "--plateau-secs",
            "60",
        ],
        &out,
    );
    // Let it start Weir and send some requests, then interrupt it as a terminal would.
    std::thread::sleep(Duration::from_secs(3));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let (output, took) = finish(child, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    let r = report(&out);
    assert!(n(&r["whole"], "ok") > 0, "{}", r["whole"]);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_proxy_off_the_machine_is_refused() {
    let out = temp_dir("remote");
    let child = spawn(&["--proxy", "192.0.2.1:3128"], &out);
    let (output, took) = finish(child, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("loopback"), "{stderr}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let _ = std::fs::remove_dir_all(&out);
}
