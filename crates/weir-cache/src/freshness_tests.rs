use super::*;
use http::HeaderValue;

const NOW: u64 = 1_700_000_000;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn get(headers: &[(&str, &str)]) -> request::Parts {
    let mut b = http::Request::get("http://h/");
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    b.body(()).unwrap().into_parts().0
}

fn reply(status: u16, headers: &[(&str, &str)]) -> response::Parts {
    let mut b = http::Response::builder().status(status);
    for (n, v) in headers {
        b = b.header(*n, HeaderValue::from_str(v).unwrap());
    }
    b.body(()).unwrap().into_parts().0
}

fn assess_with(status: u16, headers: &[(&str, &str)], options: &PolicyOptions<'_>) -> Assessment {
    assess(&get(&[]), &reply(status, headers), at(NOW), options)
}

fn assess_ok(headers: &[(&str, &str)]) -> Assessment {
    assess_with(200, headers, &PolicyOptions::default())
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn directive_names_in_any_case() {
    let a = assess_ok(&[("cache-control", "MaX-aGe=3600")]);
    assert!(a.storable);
    assert_eq!(a.lifetime, secs(3600));
    assert!(assess_ok(&[("cache-control", "No-CaChE, max-age=60")]).validate_always);
    assert!(!assess_ok(&[("cache-control", "No-StOrE")]).storable);
}

#[test]
fn age_uses_its_first_value() {
    let date = httpdate::fmt_http_date(at(NOW));
    let d = ("date", date.as_str());
    assert_eq!(assess_ok(&[d, ("age", "7200, 0")]).initial_age, secs(7200));
    assert_eq!(assess_ok(&[d, ("age", "0, 7200")]).initial_age, secs(0));
    let mut r = reply(200, &[d, ("age", "7200")]);
    r.headers.append(header::AGE, HeaderValue::from_static("0"));
    let a = assess(&get(&[]), &r, at(NOW), &PolicyOptions::default());
    assert_eq!(a.initial_age, secs(7200));
    // The apparent age counts when larger.
    let old = httpdate::fmt_http_date(at(NOW - 100));
    assert_eq!(
        assess_ok(&[("date", &old), ("age", "5")]).initial_age,
        secs(100)
    );
}

#[test]
fn an_invalid_expires_means_expired() {
    for bad in ["Thu, 18  Aug  2050 02:01:18 GMT", "0", "tomorrow"] {
        let a = assess_ok(&[("expires", bad)]);
        assert_eq!(a.lifetime, Duration::ZERO, "{bad}");
        assert!(a.storable, "{bad}: explicit (if zero) freshness");
    }
}

#[test]
fn obsolete_date_formats_are_read() {
    let date = ("date", "Sun, 06 Nov 1994 08:49:37 GMT");
    for expires in ["Sunday, 06-Nov-94 09:49:37 GMT", "Sun Nov  6 09:49:37 1994"] {
        let a = assess_ok(&[date, ("expires", expires)]);
        assert_eq!(a.lifetime, secs(3600), "{expires}");
    }
    let modified = ("last-modified", "Sat Nov  5 08:49:37 1994");
    let a = assess_ok(&[("date", "Sunday, 06-Nov-94 08:49:37 GMT"), modified]);
    assert_eq!(a.lifetime, secs(8640), "a tenth of a day");
}

#[test]
fn max_age_wins_over_expires_and_s_maxage_over_both() {
    let e = ("expires", "Thu, 01 Jan 2099 00:00:00 GMT");
    assert_eq!(
        assess_ok(&[e, ("cache-control", "max-age=5")]).lifetime,
        secs(5)
    );
    let a = assess_ok(&[e, ("cache-control", "max-age=5, s-maxage=7")]);
    assert_eq!(a.lifetime, secs(7));
    assert!(a.forbids_stale);
    assert!(!assess_ok(&[("cache-control", "max-age=5")]).forbids_stale);
}

#[test]
fn any_final_status_with_explicit_freshness_is_stored() {
    for status in [200, 299, 400, 499, 500, 502, 503, 504, 599] {
        let a = assess_with(
            status,
            &[("cache-control", "max-age=60")],
            &PolicyOptions::default(),
        );
        assert!(a.storable, "{status}");
    }
    // Without explicit freshness only heuristically cacheable statuses are.
    assert!(assess_with(404, &[], &PolicyOptions::default()).storable);
    assert!(!assess_with(500, &[], &PolicyOptions::default()).storable);
    assert!(!assess_with(302, &[], &PolicyOptions::default()).storable);
    // Never a 304 or a 206.
    assert!(
        !assess_with(
            304,
            &[("cache-control", "max-age=60")],
            &PolicyOptions::default()
        )
        .storable
    );
    assert!(
        !assess_with(
            206,
            &[("cache-control", "max-age=60")],
            &PolicyOptions::default()
        )
        .storable
    );
}

#[test]
fn must_understand_overrides_no_store_for_understood_statuses() {
    let cc = ("cache-control", "max-age=3600, no-store, must-understand");
    assert!(assess_ok(&[cc]).storable);
    assert!(!assess_with(299, &[cc], &PolicyOptions::default()).storable);
}

#[test]
fn qualified_private_and_no_cache_name_fields_not_stored() {
    let a = assess_ok(&[(
        "cache-control",
        r#"max-age=60, no-cache="Set-Cookie, x-a", private="x-b""#,
    )]);
    assert!(a.storable);
    assert!(!a.validate_always);
    assert_eq!(a.unstored_fields, vec!["x-b", "set-cookie", "x-a"]);
    assert!(!assess_ok(&[("cache-control", "max-age=60, private")]).storable);
}

#[test]
fn set_cookie_is_refused_unless_kept_out_or_allowed() {
    let refuse = PolicyOptions {
        refuse_set_cookie: true,
        ..PolicyOptions::default()
    };
    let h = [("cache-control", "max-age=60"), ("set-cookie", "a=1")];
    assert!(assess_ok(&h).storable);
    assert!(!assess_with(200, &h, &refuse).storable);
    assert!(
        !assess_with(
            200,
            &[("cache-control", "public, max-age=60"), h[1]],
            &refuse
        )
        .storable
    );
    for cc in [
        r#"max-age=60, private="Set-Cookie""#,
        r#"max-age=60, no-cache="x-a, set-cookie""#,
    ] {
        let kept_out = [("cache-control", cc), ("set-cookie", "a=1")];
        assert!(assess_with(200, &kept_out, &refuse).storable, "{cc}");
    }
    let other = [("cache-control", r#"max-age=60, private="x-a""#), h[1]];
    assert!(!assess_with(200, &other, &refuse).storable);
}

#[test]
fn authorization_needs_explicit_permission() {
    let req = get(&[("authorization", "Basic eDp5")]);
    let opts = PolicyOptions::default();
    let plain = reply(200, &[("cache-control", "max-age=60")]);
    assert!(!assess(&req, &plain, at(NOW), &opts).storable);
    for cc in [
        "max-age=60, public",
        "s-maxage=60",
        "max-age=60, must-revalidate",
    ] {
        let r = reply(200, &[("cache-control", cc)]);
        assert!(assess(&req, &r, at(NOW), &opts).storable, "{cc}");
    }
}

#[test]
fn a_request_no_store_stores_nothing() {
    let r = reply(200, &[("cache-control", "max-age=60")]);
    let req = get(&[("cache-control", "No-Store")]);
    assert!(!assess(&req, &r, at(NOW), &PolicyOptions::default()).storable);
}

#[test]
fn targeted_fields_replace_cache_control_and_expires() {
    let fields = [
        HeaderName::from_static("weir-cache-control"),
        HeaderName::from_static("cdn-cache-control"),
    ];
    let opts = PolicyOptions {
        targeted_fields: &fields,
        ..PolicyOptions::default()
    };
    let a = assess_with(
        200,
        &[
            ("cache-control", "no-store"),
            ("cdn-cache-control", "max-age=600"),
        ],
        &opts,
    );
    assert!(a.storable);
    assert_eq!(a.lifetime, secs(600));
    let a = assess_with(
        200,
        &[
            ("cache-control", "max-age=600"),
            ("cdn-cache-control", "no-store"),
        ],
        &opts,
    );
    assert!(!a.storable);
    let e = ("expires", "Thu, 01 Jan 2099 00:00:00 GMT");
    let a = assess_with(200, &[e, ("cdn-cache-control", "stale-if-error=60")], &opts);
    assert_eq!(
        a.lifetime,
        Duration::ZERO,
        "Expires ignored, no Last-Modified"
    );
    // The operator's own field comes first; an invalid one falls through.
    let h = [
        ("weir-cache-control", "max-age=5"),
        ("cdn-cache-control", "max-age=600"),
    ];
    assert_eq!(assess_with(200, &h, &opts).lifetime, secs(5));
    let h = [
        ("weir-cache-control", "Max-Age=5"),
        ("cdn-cache-control", "max-age=600"),
    ];
    assert_eq!(assess_with(200, &h, &opts).lifetime, secs(600));
    // Without configured fields they mean nothing.
    let h = [
        ("cache-control", "no-store"),
        ("cdn-cache-control", "max-age=600"),
    ];
    assert!(!assess_ok(&h).storable);
}

#[test]
fn pragma_counts_only_without_cache_control() {
    let r = request_directives(&get(&[("pragma", "No-Cache")]).headers);
    assert!(r.no_cache);
    let r =
        request_directives(&get(&[("pragma", "no-cache"), ("cache-control", "max-stale")]).headers);
    assert!(!r.no_cache);
}

#[test]
fn request_directives_decide_reuse() {
    let none = RequestDirectives::default();
    assert!(satisfies(&none, false, secs(60), secs(59)));
    assert!(!satisfies(&none, false, secs(60), secs(60)));
    let r = |cc: &str| request_directives(&get(&[("cache-control", cc)]).headers);
    assert!(!satisfies(&r("no-cache"), false, secs(60), secs(1)));
    assert!(!satisfies(&r("max-age=10"), false, secs(60), secs(11)));
    assert!(satisfies(&r("max-age=10"), false, secs(60), secs(10)));
    assert!(!satisfies(&r("min-fresh=30"), false, secs(60), secs(31)));
    assert!(satisfies(&r("min-fresh=30"), false, secs(60), secs(30)));
    assert!(satisfies(&r("max-stale"), false, secs(60), secs(6000)));
    assert!(satisfies(&r("max-stale=10"), false, secs(60), secs(70)));
    assert!(!satisfies(&r("max-stale=10"), false, secs(60), secs(71)));
    assert!(
        !satisfies(&r("max-stale"), true, secs(60), secs(61)),
        "must-revalidate"
    );
}

#[test]
fn the_heuristic_is_bounded() {
    let date = ("date", "Sun, 06 Nov 1994 08:49:37 GMT");
    let year_old = ("last-modified", "Sat, 06 Nov 1993 08:49:37 GMT");
    // A tenth of a year is over three days: capped by default.
    assert_eq!(assess_ok(&[date, year_old]).lifetime, HEURISTIC_MAX);
    let rule = |fraction: f32, min: u64, max: u64| PolicyOptions {
        heuristic: Heuristic {
            fraction,
            min: secs(min),
            max: secs(max),
        },
        ..PolicyOptions::default()
    };
    let day_old = ("last-modified", "Sat, 05 Nov 1994 08:49:37 GMT");
    assert_eq!(
        assess_with(200, &[date, day_old], &rule(0.5, 0, 1_000_000)).lifetime,
        secs(43200)
    );
    assert_eq!(
        assess_with(200, &[date, day_old], &rule(0.5, 0, 600)).lifetime,
        secs(600)
    );
    assert_eq!(
        assess_with(200, &[date, day_old], &rule(0.0, 60, 600)).lifetime,
        secs(60)
    );
    // Without Last-Modified, the minimum.
    assert_eq!(
        assess_with(200, &[date], &rule(0.5, 60, 600)).lifetime,
        secs(60)
    );
    // Explicit freshness is not bounded by the rule.
    let cc = ("cache-control", "max-age=5");
    assert_eq!(
        assess_with(200, &[date, cc], &rule(0.5, 60, 600)).lifetime,
        secs(5)
    );
}

#[test]
fn each_date_is_read_as_it_is_though_the_last_one_is_remembered() {
    let date = |text: &str| response_date(&reply(200, &[("date", text)]).headers);
    let a = httpdate::fmt_http_date(at(NOW));
    let b = httpdate::fmt_http_date(at(NOW + 1));
    for _ in 0..2 {
        assert_eq!(date(&a), Some(at(NOW)));
        assert_eq!(date(&a), Some(at(NOW)));
        assert_eq!(date(&b), Some(at(NOW + 1)));
    }
    // A text that is no date, the same length as one, and a long obsolete form.
    assert_eq!(date(&"x".repeat(a.len())), None);
    assert_eq!(date(&a), Some(at(NOW)));
    assert_eq!(date("Tuesday, 14-Nov-23 22:13:20 GMT"), Some(at(NOW)));
    assert!(reply(200, &[]).headers.get("date").is_none());
    assert_eq!(response_date(&reply(200, &[]).headers), None);
}
