use super::*;

/// A client's head: `fields` in order, as a parser would append them.
fn client(version: Version, fields: &[(&str, &str)]) -> Arc<request::Parts> {
    let mut req = Request::get("http://a.example/p?q=1").body(()).unwrap();
    *req.version_mut() = version;
    for (name, value) in fields {
        let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
        req.headers_mut()
            .append(name, HeaderValue::from_str(value).unwrap());
    }
    Arc::new(req.into_parts().0)
}

fn fill(client: &Arc<request::Parts>) -> OriginRequest {
    let host = HeaderValue::from_static("origin.example:8080");
    OriginRequest::fill(client, host, PathAndQuery::from_static("/p?q=1"))
}

/// What the HTTP/1.1 writer sends for `request`.
fn written(request: OriginRequest) -> String {
    let (head, _) = request.into_parts();
    let mut out = Vec::new();
    assert!(matches!(
        head.write(BodyKnown::Empty, &mut out),
        Outgoing::None
    ));
    String::from_utf8(out).unwrap()
}

/// The request line, then the fields other than `Host`, by name (the values of a name
/// in the order sent), then `Host`. The map's removals move its last fields into the
/// removed ones' places, and it keeps `Host` where the client had it; the fill's writer
/// sends the client's order, `Host` first.
fn lines(wire: &str) -> (String, Vec<String>, Vec<String>) {
    assert!(wire.ends_with("\r\n\r\n"), "{wire:?}");
    let mut lines = wire.trim_end().split("\r\n").map(str::to_string);
    let first = lines.next().unwrap();
    let (host, mut rest): (Vec<String>, Vec<String>) = lines.partition(|l| l.starts_with("host: "));
    rest.sort_by_key(|l| l.split(':').next().unwrap_or("").to_string());
    (first, rest, host)
}

/// Clients whose head the fill's writer sends as is, leaving fields out.
fn written_as_is() -> Vec<Arc<request::Parts>> {
    vec![
        client(Version::HTTP_11, &[("host", "a.example")]),
        client(
            Version::HTTP_11,
            &[
                ("user-agent", "test/1"),
                ("host", "a.example"),
                ("accept", "*/*"),
                ("connection", "Keep-Alive"),
                ("keep-alive", "timeout=5"),
                ("proxy-connection", "keep-alive"),
                ("proxy-authorization", "Basic Zm9vOmJhcg=="),
                ("accept", "text/html"),
                ("expect", "100-continue"),
                ("if-none-match", "\"x\""),
                ("if-modified-since", "Thu, 01 Jan 2026 00:00:00 GMT"),
                ("x-custom", "1"),
                ("via", "1.1 other"),
            ],
        ),
        client(Version::HTTP_10, &[("connection", "close"), ("x-a", "b")]),
        client(Version::HTTP_2, &[("accept-encoding", "gzip")]),
        client(Version::HTTP_11, &[("upgrade", "h2c"), ("connection", "")]),
    ]
}

#[test]
fn a_fill_is_sent_as_the_map_made_for_it_would_be() {
    for head in written_as_is() {
        let mut as_map = fill(&head);
        assert!(as_map.own_headers().is_none(), "{head:?} is written as is");
        as_map.head_mut();
        assert!(as_map.own_headers().is_some());
        let from_client = lines(&written(fill(&head)));
        let from_map = lines(&written(as_map));
        assert_eq!(from_client, from_map, "{head:?}");
        assert_eq!(from_client.2, ["host: origin.example:8080"]);
        // What every fill's request is told and is not.
        let fields = written(fill(&head));
        let via = format!("via: {}\r\n\r\n", ours(head.version));
        assert!(fields.ends_with(&via), "{fields}");
        for gone in [
            "connection",
            "keep-alive",
            "proxy-",
            "expect",
            "if-",
            "upgrade",
        ] {
            assert!(!fields.contains(gone), "{gone} sent: {fields}");
        }
    }
}

#[test]
fn a_fill_keeps_the_clients_fields_in_order() {
    let head = &written_as_is()[1];
    assert_eq!(
        written(fill(head)),
        format!(
            "GET /p?q=1 HTTP/1.1\r\nhost: origin.example:8080\r\nuser-agent: test/1\r\n\
             accept: */*\r\naccept: text/html\r\nx-custom: 1\r\nvia: 1.1 other\r\n\
             via: {}\r\n\r\n",
            ours(Version::HTTP_11)
        )
    );
    // An HTTP/2 client takes trailers, and its `Via` says so.
    let h2 = &written_as_is()[3];
    let end = format!("te: trailers\r\nvia: {}\r\n\r\n", ours(Version::HTTP_2));
    assert!(written(fill(h2)).ends_with(&end));
}

/// A client's head that the fill's writer does not send as is, and what the map made
/// for it sends and leaves out.
struct NeedsAMap {
    fields: &'static [(&'static str, &'static str)],
    sent: &'static [&'static str],
    not_sent: &'static [&'static str],
}

fn assert_made_as_a_map(head: Arc<request::Parts>, sent: &[&str], not_sent: &[&str]) {
    let mut request = fill(&head);
    assert!(request.own_headers().is_some(), "{head:?} gets a map");
    let wire = written(request);
    for s in sent {
        assert!(wire.contains(&format!("\r\n{s}\r\n")), "{s} not in {wire}");
    }
    for s in not_sent {
        assert!(!wire.contains(s), "{s} in {wire}");
    }
    let end = format!("via: {}\r\n\r\n", ours(Version::HTTP_11));
    assert!(wire.ends_with(&end), "{wire}");
}

/// This process's `Via` entry for a client of `version`: `1.1 weir (mark)`.
fn ours(version: Version) -> String {
    let via = crate::via::outbound(version).to_str().unwrap().to_owned();
    assert!(via.contains(" weir ("), "{via}");
    via
}

#[test]
fn heads_that_need_more_than_leaving_fields_out_get_a_map() {
    let cases = [
        // `TE: trailers` is kept (as `Connection: TE` asked), other codings are not.
        NeedsAMap {
            fields: &[("te", "trailers, deflate"), ("connection", "TE")],
            sent: &["te: trailers"],
            not_sent: &["deflate", "connection"],
        },
        // A field `Connection` names goes with it.
        NeedsAMap {
            fields: &[
                ("connection", "x-secret, keep-alive"),
                ("x-secret", "1"),
                ("x-b", "2"),
            ],
            sent: &["x-b: 2"],
            not_sent: &["x-secret"],
        },
        // `close` names a field the message carries.
        NeedsAMap {
            fields: &[("connection", "close"), ("close", "1")],
            sent: &[],
            not_sent: &["close"],
        },
        // The cluster's marks are the hop's to remove.
        NeedsAMap {
            fields: &[("weir-hop", "n1"), ("weir-hop-origin", "http://o")],
            sent: &["weir-hop: n1"],
            not_sent: &[],
        },
    ];
    for case in cases {
        let head = client(Version::HTTP_11, case.fields);
        assert_made_as_a_map(head, case.sent, case.not_sent);
    }
    // A `Connection` value that is not text: as the map's rules say (ignored, removed).
    let mut req = Request::get("/p").body(()).unwrap();
    let value = HeaderValue::from_bytes(b"\xe9").unwrap();
    req.headers_mut().insert(header::CONNECTION, value);
    assert_made_as_a_map(Arc::new(req.into_parts().0), &[], &["connection"]);
}

#[test]
fn a_request_of_its_own_is_written_with_its_framing() {
    let mut req = Request::post("/up").body(RequestBody::Empty).unwrap();
    req.headers_mut()
        .insert(header::HOST, HeaderValue::from_static("o"));
    let (head, _) = OriginRequest::from(req).into_parts();
    assert_eq!(*head.method(), Method::POST);
    let mut out = Vec::new();
    assert!(matches!(
        head.write(BodyKnown::Exact(3), &mut out),
        Outgoing::Length(3)
    ));
    assert_eq!(
        out,
        b"POST /up HTTP/1.1\r\nhost: o\r\ncontent-length: 3\r\n\r\n"
    );
}
