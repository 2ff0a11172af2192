use super::*;
use crate::cache_control::Directives;

fn response(cc: &str) -> ResponseDirectives {
    ResponseDirectives::read(Directives::of_str(cc))
}

fn request(cc: &str) -> RequestDirectives {
    RequestDirectives::read(Directives::of_str(cc))
}

fn secs(s: u64) -> Option<Duration> {
    Some(Duration::from_secs(s))
}

#[test]
fn response_directives_in_any_case() {
    let r = response("No-CaChE, MaX-aGe=3600, PUBLIC, S-MaxAge=60, Must-Understand");
    assert_eq!(r.no_cache, FieldScope::Whole);
    assert_eq!(r.max_age, secs(3600));
    assert_eq!(r.s_maxage, secs(60));
    assert!(r.public && r.must_understand);
    assert!(r.forbids_stale(), "s-maxage implies proxy-revalidate");
}

#[test]
fn the_first_occurrence_counts() {
    assert_eq!(response("max-age=10, max-age=20").max_age, secs(10));
    assert_eq!(request("max-stale=5, max-stale").max_stale, Some(secs(5)));
}

#[test]
fn qualified_no_cache_and_private_list_fields() {
    let r = response(r#"no-cache="Set-Cookie, X-A", private="x-b""#);
    assert_eq!(
        r.no_cache,
        FieldScope::Fields(vec!["set-cookie".into(), "x-a".into()])
    );
    assert_eq!(r.private, FieldScope::Fields(vec!["x-b".into()]));
    assert!(!r.no_cache.is_whole());
    // An empty list is the unqualified form.
    assert_eq!(response(r#"private="""#).private, FieldScope::Whole);
}

#[test]
fn a_freshness_argument_that_is_not_seconds_is_invalid() {
    let r = response("max-age=soon");
    assert_eq!(r.max_age, None);
    assert!(r.invalid_freshness);
    assert!(response("s-maxage").invalid_freshness);
    assert!(!response("max-age=5").invalid_freshness);
    // Saturates instead.
    assert_eq!(response("max-age=99999999999").max_age, secs(1 << 31));
}

#[test]
fn stale_windows() {
    let r = response("stale-while-revalidate=30, stale-if-error=600, must-revalidate");
    assert_eq!(r.stale_while_revalidate, secs(30));
    assert_eq!(r.stale_if_error, secs(600));
    assert!(r.forbids_stale());
    assert!(!response("max-age=1").forbids_stale());
}

#[test]
fn request_directives() {
    let r = request("Max-Age=0, min-fresh=10, No-Cache, no-store, only-if-cached");
    assert_eq!(r.max_age, secs(0));
    assert_eq!(r.min_fresh, secs(10));
    assert!(r.no_cache && r.no_store && r.only_if_cached);
    assert!(r.constrains_freshness());
    assert_eq!(request("max-stale").max_stale, Some(None));
    assert!(!request("only-if-cached, stale-if-error=5").constrains_freshness());
    assert_eq!(request("").max_age, None);
}
