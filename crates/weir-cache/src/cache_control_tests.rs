use super::*;

fn headers(lines: &[&str]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for l in lines {
        h.append(header::CACHE_CONTROL, HeaderValue::from_str(l).unwrap());
    }
    h
}

fn all(line: &str) -> Vec<(String, Option<String>)> {
    Directives::of_str(line)
        .map(|d| (d.name().to_string(), d.argument().map(str::to_string)))
        .collect()
}

fn pair(n: &str, a: Option<&str>) -> (String, Option<String>) {
    (n.to_string(), a.map(str::to_string))
}

#[test]
fn names_match_in_any_case() {
    let h = headers(&["No-CaChE, MaX-aGe=3600"]);
    assert_eq!(directive(&h, "no-cache").as_deref(), Some(""));
    assert_eq!(directive(&h, "max-age").as_deref(), Some("3600"));
    assert_eq!(directive(&h, "no-store"), None);
}

#[test]
fn quoted_arguments_keep_their_commas() {
    assert_eq!(
        all(r#"no-cache="set-cookie, x-a", private="x-b",max-age=5"#),
        vec![
            pair("no-cache", Some("set-cookie, x-a")),
            pair("private", Some("x-b")),
            pair("max-age", Some("5")),
        ]
    );
}

#[test]
fn escapes_in_quoted_strings_are_undone() {
    assert_eq!(
        all(r#"ext="a\"b\\c", x"#),
        vec![pair("ext", Some(r#"a"b\c"#)), pair("x", None)]
    );
}

#[test]
fn whitespace_and_empty_elements_are_skipped() {
    assert_eq!(
        all(" , public ,,\tmax-age = 60 , "),
        vec![pair("public", None), pair("max-age", Some("60"))]
    );
}

#[test]
fn unreadable_elements_are_dropped_alone() {
    // An unterminated quote swallows the rest; a stray character drops its element.
    assert_eq!(all("=5, a b, public"), vec![pair("public", None)]);
    assert_eq!(
        all(r#"private, ext="open, max-age=5"#),
        vec![pair("private", None)]
    );
    assert_eq!(all("max-age=, no-store"), vec![pair("no-store", None)]);
}

#[test]
fn every_line_counts_in_order() {
    let h = headers(&["max-age=10", "MAX-AGE=20, s-maxage=30"]);
    assert_eq!(directive(&h, "max-age").as_deref(), Some("10"));
    assert_eq!(directive(&h, "s-maxage").as_deref(), Some("30"));
    assert_eq!(directives(&h).count(), 3);
}

#[test]
fn delta_seconds_saturate_and_refuse_non_digits() {
    assert_eq!(delta_seconds("0"), Some(0));
    assert_eq!(delta_seconds("3600"), Some(3600));
    assert_eq!(delta_seconds("2147483648"), Some(DELTA_SECONDS_MAX));
    assert_eq!(
        delta_seconds("99999999999999999999999"),
        Some(DELTA_SECONDS_MAX)
    );
    assert_eq!(delta_seconds("-1"), None);
    assert_eq!(delta_seconds("1.5"), None);
    assert_eq!(delta_seconds(" 5"), None);
    assert_eq!(delta_seconds(""), None);
}

#[test]
fn field_lists_are_lower_case_names() {
    assert_eq!(
        field_names("Set-Cookie, x-a ,, bad name"),
        vec!["set-cookie", "x-a"]
    );
    assert!(field_names("").is_empty());
}
