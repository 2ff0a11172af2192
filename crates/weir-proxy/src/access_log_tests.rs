//! The access log's lines, formats and files.

use super::*;

fn record() -> LogRecord<'static> {
    LogRecord {
        start: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        elapsed: Duration::from_millis(145),
        client: "127.0.0.1:50000".parse().unwrap(),
        method: "GET",
        url: "http://example.com/",
        version: http::Version::HTTP_11,
        status: 200,
        bytes_out: 1234,
        aborted: false,
        outcome: CacheOutcome::Miss,
        upstream: Some("example.com:80"),
        content_type: Some("text/html"),
        user_agent: Some("curl/8.0 \"x\"\n"),
        referer: None,
        user: None,
        fields: &[],
    }
}

#[test]
fn module_fields_come_last_and_cannot_split_the_line() {
    let fields = [
        ("adblock", "blocked rule".to_string()),
        ("enc", "gzip".to_string()),
    ];
    let r = LogRecord {
        fields: &fields,
        ..record()
    };
    let line = format_line(LogFormat::Squid, &r);
    assert!(
        line.ends_with(" text/html adblock=blocked%20rule enc=gzip\n"),
        "{line}"
    );
    let line = format_line(LogFormat::Combined, &r);
    assert!(
        line.ends_with("\" adblock=blocked%20rule enc=gzip\n"),
        "{line}"
    );
}

#[test]
fn the_user_fills_the_user_fields_and_cannot_split_the_line() {
    let r = LogRecord {
        user: Some("ann lee"),
        ..record()
    };
    let line = format_line(LogFormat::Squid, &r);
    assert!(
        line.contains(" http://example.com/ ann%20lee HIER_DIRECT/"),
        "{line}"
    );
    let line = format_line(LogFormat::Combined, &r);
    assert!(
        line.starts_with("127.0.0.1 - ann%20lee [14/Nov/2023"),
        "{line}"
    );
}

#[test]
fn squid_line() {
    assert_eq!(
        format_line(LogFormat::Squid, &record()),
        "1700000000.268    145 127.0.0.1 TCP_MISS/200 1234 GET http://example.com/ - \
         HIER_DIRECT/example.com:80 text/html\n"
    );
    let r = LogRecord {
        outcome: CacheOutcome::Error,
        status: 0,
        bytes_out: 0,
        upstream: None,
        content_type: Some("text/html; charset=utf-8"),
        ..record()
    };
    assert_eq!(
        format_line(LogFormat::Squid, &r),
        "1700000000.268    145 127.0.0.1 TCP_MISS_ABORTED/000 0 GET http://example.com/ - \
         HIER_NONE/- text/html;%20charset=utf-8\n"
    );
    // A body that did not reach the client whole, from the cache or from the origin.
    for (outcome, code) in [
        (CacheOutcome::Hit, "TCP_MEM_HIT_ABORTED/200 "),
        (CacheOutcome::Error, "TCP_MISS_ABORTED/200 "),
    ] {
        let r = LogRecord {
            outcome,
            aborted: true,
            ..record()
        };
        let line = format_line(LogFormat::Squid, &r);
        assert!(
            line.contains(&format!(" 127.0.0.1 {code}1234 GET ")),
            "{line}"
        );
    }
    let r = LogRecord {
        outcome: CacheOutcome::Error,
        status: 0,
        aborted: true,
        ..record()
    };
    assert!(format_line(LogFormat::Squid, &r).contains(" TCP_MISS_ABORTED/000 "));
}

#[test]
fn combined_line() {
    assert_eq!(
        format_line(LogFormat::Combined, &record()),
        "127.0.0.1 - - [14/Nov/2023:22:13:20 +0000] \"GET http://example.com/ HTTP/1.1\" \
         200 1234 \"-\" \"curl/8.0 \\\"x\\\"\\x0a\"\n"
    );
}

#[test]
fn clf_dates() {
    let mut s = String::new();
    push_clf_time(&mut s, 971_186_136);
    assert_eq!(s, "10/Oct/2000:13:55:36 +0000");
    s.clear();
    push_clf_time(&mut s, 951_782_400); // leap day
    assert_eq!(s, "29/Feb/2000:00:00:00 +0000");
}

#[test]
fn file_log_appends_lines() {
    let path = std::env::temp_dir().join(format!(
        "weir-access-log-test-{}-{}.log",
        std::process::id(),
        since_epoch(SystemTime::now()).as_nanos()
    ));
    let config = LogConfig {
        access: path.to_string_lossy().into_owned(),
        format: LogFormat::Squid,
    };
    let log = AccessLog::open(&config).unwrap().expect("log is on");
    log.log(&record());
    log.log(&LogRecord {
        outcome: CacheOutcome::Hit,
        ..record()
    });
    log.flush();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text:?}");
    assert!(lines[0].contains(" TCP_MISS/200 "));
    assert!(lines[1].contains(" TCP_MEM_HIT/200 "));
    assert_eq!(log.dropped(), 0);
}

#[test]
fn off_is_none() {
    let config = LogConfig {
        access: "off".into(),
        format: LogFormat::Combined,
    };
    assert!(AccessLog::open(&config).unwrap().is_none());
}
