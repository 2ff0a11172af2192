//! Failures and bodies over the module limit: what each policy makes of them.

use super::*;

/// Answers that break the protocol in various ways, after a valid OPTIONS.
const MALFORMED: [&[u8]; 6] = [
    b"HTTP/1.1 200 OK\r\n\r\n",
    b"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, res-body=500\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
    b"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, res-body=19\r\n\r\nHTTP/1.1 200 OK\r\n\r\n5\r\nab",
    b"ICAP/1.0 200 OK\r\nEncapsulated: res-hdr=0, res-body=19\r\n\r\nHTTP/1.1 200 OK\r\n\r\nfffffff\r\n",
    b"ICAP/1.0 200 OK\r\nEncapsulated: null-body=0\r\n\r\n",
    b"ICAP/1.0 500 Server Error\r\n\r\n",
];

#[tokio::test]
async fn malformed_answers_bypass_or_fail_closed_and_change_nothing() {
    for (i, answer) in MALFORMED.iter().enumerate() {
        let s = IcapServer::start(move |r| {
            if r.method == "OPTIONS" {
                vec![Step::Send(options_answer("RESPMOD", "t1", ""))]
            } else {
                vec![Step::Send(answer.to_vec()), Step::Close]
            }
        })
        .await;
        let m = module(&service("respmod", &s.url("r"), "max_answer = 65536"));
        let (reply, head, body) = respmod(&m, "/a", whole(BODY)).await;
        assert!(reply.is_none(), "case {i}: bypass");
        assert_eq!(&body.data[..], BODY, "case {i}");
        assert_eq!(head.headers["content-type"], "text/plain", "case {i}");
        assert_eq!(m.metrics.bypassed.get(), 1, "case {i}");
        let closed = module(&service(
            "respmod",
            &s.url("r"),
            "on_failure = \"fail-closed\"",
        ));
        let (reply, _, body) = respmod(&closed, "/a", whole(BODY)).await;
        assert_eq!(reply.expect("503").status, 503, "case {i}");
        assert_eq!(&body.data[..], BODY, "case {i}");
        assert_eq!(closed.metrics.failed_closed.get(), 1, "case {i}");
    }
}

#[tokio::test]
async fn a_server_that_hangs_times_out() {
    let s =
        IcapServer::offering("REQMOD", "", |_| vec![Step::Sleep(Duration::from_secs(30))]).await;
    let m = module(&service(
        "reqmod",
        &s.url("r"),
        "timeout = \"300ms\"\non_failure = \"fail-closed\"",
    ));
    let started = Instant::now();
    let (mut t, mut req, mut body) = (txn(), request("POST", "/a"), whole(b"x"));
    let reply = decide(m.on_whole_request(&mut t, &mut req, &mut body)).await;
    assert_eq!(reply.expect("503").status, 503);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(m.metrics.failures_timeout.get(), 1);
    assert_eq!(t.log_fields(), [("icap", "failed:timeout".to_string())]);
}

/// A POST through `m`'s REQMOD services; the reply and how long it took.
async fn post(m: &Icap) -> (Option<Reply>, Duration) {
    let started = Instant::now();
    let (mut t, mut req, mut body) = (txn(), request("POST", "/a"), whole(b"x"));
    let reply = decide(m.on_whole_request(&mut t, &mut req, &mut body)).await;
    (reply, started.elapsed())
}

#[tokio::test]
async fn a_service_that_timed_out_rests_before_it_is_tried_again() {
    let s =
        IcapServer::offering("REQMOD", "", |_| vec![Step::Sleep(Duration::from_secs(30))]).await;
    let resting = module(&service(
        "reqmod",
        &s.url("r"),
        "timeout = \"200ms\"\nretry_after = \"30s\"",
    ));
    let (reply, first) = post(&resting).await;
    assert!(
        reply.is_none() && first >= Duration::from_millis(200),
        "{first:?}"
    );
    let (reply, second) = post(&resting).await;
    assert!(
        reply.is_none() && second < Duration::from_millis(150),
        "{second:?}"
    );
    assert_eq!(s.count("REQMOD"), 1, "not tried while resting");
    assert_eq!(resting.metrics.failures_resting.get(), 1);
    assert_eq!(resting.metrics.bypassed.get(), 2);
    let eager = module(&service(
        "reqmod",
        &s.url("r"),
        "timeout = \"200ms\"\nretry_after = 0",
    ));
    let _ = post(&eager).await;
    let _ = post(&eager).await;
    assert_eq!(s.count("REQMOD"), 3, "retry_after = 0 always tries");
    assert_eq!(eager.metrics.failures_timeout.get(), 2);
}

#[tokio::test]
async fn a_server_that_is_down_is_a_connect_failure() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("icap://127.0.0.1:{port}/gone");
    let m = module(&service("respmod", &url, ""));
    let (reply, _, body) = respmod(&m, "/a", whole(BODY)).await;
    assert!(reply.is_none());
    assert_eq!(&body.data[..], BODY);
    assert_eq!(
        (m.metrics.failures_connect.get(), m.metrics.bypassed.get()),
        (1, 1)
    );
}

#[tokio::test]
async fn a_truncated_body_goes_as_a_preview_only() {
    let s = IcapServer::offering("RESPMOD", "Preview: 4\r\nTransfer-Complete: bin\r\n", |r| {
        if r.http_heads.contains("/ok") {
            vec![Step::Send(unmodified_answer("t1"))]
        } else {
            vec![Step::Send(CONTINUE.to_vec())]
        }
    })
    .await;
    let closed = module(&service(
        "respmod",
        &s.url("r"),
        "on_oversize = \"fail-closed\"",
    ));
    let truncated = || WholeBody {
        data: Bytes::from_static(BODY),
        truncated: true,
    };
    let (reply, _, _) = respmod(&closed, "/ok", truncated()).await;
    assert!(reply.is_none(), "a 204 after the preview is enough");
    let (reply, _, body) = respmod(&closed, "/more", truncated()).await;
    assert_eq!(reply.expect("503").status, 503, "the service wanted more");
    assert_eq!(&body.data[..], BODY);
    let (reply, _, _) = respmod(&closed, "/file.bin", truncated()).await;
    assert_eq!(reply.expect("503").status, 503, "Transfer-Complete");
    assert_eq!(
        s.count("RESPMOD"),
        2,
        "a whole body that is not there is not sent"
    );
    assert_eq!(closed.metrics.oversize.get(), 2);
    let bypass = module(&service("respmod", &s.url("r"), ""));
    let (reply, _, _) = respmod(&bypass, "/more", truncated()).await;
    assert!(reply.is_none());
}

#[tokio::test]
async fn head_requests_and_bodiless_statuses_are_not_sent() {
    let s =
        IcapServer::offering("RESPMOD", "", |_| vec![Step::Send(unmodified_answer("t1"))]).await;
    let m = module(&service("respmod", &s.url("r"), ""));
    let mut t = txn();
    let _ = m.on_upstream_request(&mut t, &mut request("HEAD", "/a"));
    let mut head = response(200, 10);
    assert!(
        decide(m.on_whole_response(&mut t, &mut head, &mut whole(b"")))
            .await
            .is_none()
    );
    let mut t = txn();
    let mut not_modified = response(304, 0);
    assert!(
        decide(m.on_whole_response(&mut t, &mut not_modified, &mut whole(b"")))
            .await
            .is_none()
    );
    assert_eq!(s.count("RESPMOD"), 0);
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_replaced() {
    // Each answer says nothing of closing, then the server closes the connection.
    let s = IcapServer::start(|r| {
        if r.method == "OPTIONS" {
            vec![Step::Send(options_answer("RESPMOD", "t1", ""))]
        } else {
            vec![Step::Send(unmodified_answer("t1")), Step::Close]
        }
    })
    .await;
    let m = module(&service("respmod", &s.url("r"), ""));
    for round in 0..6 {
        let (reply, _, body) = respmod(&m, "/a", whole(BODY)).await;
        assert!(reply.is_none() && body.data[..] == *BODY, "round {round}");
        // Half the rounds let the server's close reach the idle connection (found
        // when it is taken), half reuse it at once (the exchange fails before any
        // answer byte and is retried on a new connection).
        if round % 2 == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(m.metrics.unmodified.get(), 6);
    assert_eq!(m.metrics.bypassed.get(), 0, "no exchange failed");
    assert_eq!(s.count("RESPMOD"), 6);
}

#[tokio::test]
async fn a_reused_connection_closed_under_a_request_is_retried_once() {
    // Every other request is met with a close and no answer, as when a server's idle
    // timeout strikes just as the request arrives: on a reused connection, the
    // request goes again on a new one. A new connection that fails is not retried.
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s = IcapServer::start(move |r| {
        if r.method == "OPTIONS" {
            return vec![Step::Send(options_answer("RESPMOD", "t1", ""))];
        }
        if seen
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            .is_multiple_of(2)
        {
            vec![Step::Close]
        } else {
            vec![Step::Send(unmodified_answer("t1"))]
        }
    })
    .await;
    let m = module(&service("respmod", &s.url("r"), ""));
    for round in 0..3 {
        let (reply, _, body) = respmod(&m, "/a", whole(BODY)).await;
        assert!(reply.is_none() && body.data[..] == *BODY, "round {round}");
    }
    assert_eq!(m.metrics.unmodified.get(), 3);
    assert_eq!(
        m.metrics.bypassed.get(),
        0,
        "every exchange succeeded on its retry"
    );
    assert_eq!(s.count("RESPMOD"), 6);
    assert_eq!(s.connections(), 4);
}
