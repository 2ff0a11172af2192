//! What the error tests share: checks of a plain-text error and of a proxy still serving.

use crate::common::*;

/// A proxy-generated error: the status, and a non-empty plain-text body.
pub fn assert_plain_error(r: &Fetched, status: u16) {
    assert_eq!(r.status, status, "body: {:?}", r.text());
    assert!(
        !r.text().trim().is_empty(),
        "{status} needs a short reason in the body"
    );
    let ct = r.header("content-type").unwrap_or_default();
    assert!(
        ct.starts_with("text/plain"),
        "{status}: Content-Type {ct:?}"
    );
}

pub fn assert_raw_plain_error(r: &RawResponse, status: u16) {
    assert_eq!(r.status, status, "body: {:?}", r.text());
    assert!(
        !r.text().trim().is_empty(),
        "{status} needs a short reason in the body"
    );
    let ct = r.header("content-type").unwrap_or_default();
    assert!(
        ct.starts_with("text/plain"),
        "{status}: Content-Type {ct:?}"
    );
}

/// The proxy still serves a normal request (and its process still runs).
pub fn assert_still_serving(proxy: &mut Proxy, origin: &TestOrigin) {
    origin.route("/alive", Reply::ok("alive").cc("no-store"));
    let before = origin.count("/alive");
    let r = raw_exchange(
        proxy.forward_addr(),
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
            origin.url("/alive"),
            origin.addr()
        )
        .as_bytes(),
    );
    assert_eq!((r.status, r.text().as_str()), (200, "alive"));
    assert_eq!(origin.count("/alive"), before + 1);
    assert!(proxy.is_running(), "the proxy process died");
}
