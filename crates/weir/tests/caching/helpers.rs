//! What the caching tests share: a proxy and client; checks of `Cache-Status` and `Age`.

use crate::common::*;

/// An origin, a forward proxy with the default configuration, and a client using it.
pub fn setup() -> (TestOrigin, Proxy, reqwest::Client) {
    let origin = TestOrigin::start();
    let proxy = Proxy::forward();
    let client = proxied_client(proxy.forward_addr());
    (origin, proxy, client)
}

pub fn assert_hit(r: &Fetched, what: &str) {
    assert!(
        is_hit(&r.cache_status()),
        "{what}: expected `Cache-Status: weir; hit`, got {:?}",
        r.cache_status()
    );
}

pub fn assert_not_hit(r: &Fetched, what: &str) {
    let cs = r.cache_status();
    assert!(
        weir_cache_status(&cs).is_some() && !is_hit(&cs),
        "{what}: expected a weir Cache-Status that is not a hit, got {cs:?}"
    );
}

pub fn assert_stored_miss(r: &Fetched, what: &str) {
    let cs = r.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("miss")) && cs_has(&cs, "stored", None),
        "{what}: expected `Cache-Status: weir; fwd=miss; stored`, got {cs:?}"
    );
}

/// `Cache-Status` says the request went to the origin because of `fwd` (`stale`,
/// `request`, ...) and the origin answered `status`.
pub fn assert_forwarded(r: &Fetched, fwd: &str, status: &str, what: &str) {
    let cs = r.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some(fwd)) && cs_has(&cs, "fwd-status", Some(status)),
        "{what}: expected `weir; fwd={fwd}; fwd-status={status}`, got {cs:?}"
    );
}

pub fn age(r: &Fetched) -> u64 {
    r.header("age")
        .unwrap_or_else(|| panic!("no Age header; headers: {:?}", r.headers))
        .trim()
        .parse()
        .expect("Age is an integer")
}
