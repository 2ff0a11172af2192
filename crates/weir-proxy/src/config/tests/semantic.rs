//! Semantic errors: each names the line and key of what was written.

use super::support::*;
use crate::config::*;

#[test]
fn needs_a_listener() {
    fails(
        "# nothing to serve\nlisten = []\n",
        2,
        "listen",
        "at least one",
    );
}

#[test]
fn reverse_needs_origin() {
    let text = TWO_LISTENERS.replace("origin = \"http://127.0.0.1:8081\"\n", "");
    fails(&text, 5, "listen[1].origin", "needs an `origin`");
}

#[test]
fn forward_takes_no_origin_or_route() {
    let text = "[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\norigin = \"http://a\"\n";
    fails(text, 4, "listen[0].origin", "only a reverse listener");
    let text = "[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\n[[listen.route]]\norigin = \"http://a\"\n";
    fails(
        text,
        4,
        "listen[0].route",
        "only a reverse listener has routes",
    );
}

#[test]
fn origins_must_parse() {
    let text = TWO_LISTENERS.replace("http://127.0.0.1:8081", "ftp://127.0.0.1:8081");
    fails(&text, 8, "listen[1].origin", "scheme `ftp`");
    let text = TWO_LISTENERS.replace("http://127.0.0.1:8081", "https://127.0.0.1:8081");
    parse(&text);
    let text = TWO_LISTENERS.replace("http://127.0.0.1:8082", "127.0.0.1:8082");
    fails(&text, 10, "listen[1].route[0].origin", "needs a scheme");
    let text = TWO_LISTENERS.replace("http://127.0.0.1:8082", "http://a/b");
    fails(&text, 10, "listen[1].route[0].origin", "no path");
}

#[test]
fn path_prefix_starts_with_slash() {
    let text = format!("{TWO_LISTENERS}  path_prefix = \"api/\"\n");
    fails(
        &text,
        11,
        "listen[1].route[0].path_prefix",
        "must start with `/`",
    );
}

#[test]
fn duplicate_addresses() {
    let text = TWO_LISTENERS.replace("127.0.0.1:8080", "127.0.0.1:3128");
    fails(&text, 6, "listen[1].addr", "already used by listen[0]");
    let text = TWO_LISTENERS.replace("127.0.0.1:8080", "0.0.0.0:3128");
    fails(&text, 6, "listen[1].addr", "already used by listen[0]");
    let text = TWO_LISTENERS.replace("127.0.0.1:3128", "127.0.0.1:9090");
    fails(
        &text,
        2,
        "listen[0].addr",
        "already used by the admin listener",
    );
    // Port 0 is a fresh port each time; different families do not collide.
    let text = TWO_LISTENERS
        .replace("127.0.0.1:3128", "127.0.0.1:0")
        .replace("127.0.0.1:8080", "127.0.0.1:0");
    parse(&format!("[admin]\nlisten = \"127.0.0.1:0\"\n{text}"));
    let text = TWO_LISTENERS
        .replace("127.0.0.1:3128", "0.0.0.0:8080")
        .replace("127.0.0.1:8080", "[::1]:8080");
    parse(&text);
}

#[test]
fn cache_sizes() {
    fails("[cache]\nmemory = 0\n", 2, "cache.memory", "greater than 0");
    // Without a disk tier, every object must fit in memory.
    fails(
        "[cache]\ndisk = \"off\"\nmemory = \"1MiB\"\nmax_object = \"2MiB\"\n",
        4,
        "cache.max_object",
        "must not exceed memory",
    );
    // The default max_object (64MiB) is over a small memory: blame what was written.
    fails(
        "[cache]\ndisk = \"off\"\nmemory = \"1MiB\"\n",
        3,
        "cache.memory",
        "must not exceed memory",
    );
    // With one, larger objects live on disk.
    parse("[cache]\nmemory = \"1MiB\"\nmax_object = \"2MiB\"\n");
    parse("[cache]\nmemory = \"1MiB\"\nmax_object = \"1MiB\"\n");
}

#[test]
fn heuristic_fraction_range() {
    fails(
        "[cache]\nheuristic_fraction = 1.5\n",
        2,
        "cache.heuristic_fraction",
        "between 0 and 1",
    );
    fails(
        "[cache]\nheuristic_fraction = -0.1\n",
        2,
        "cache.heuristic_fraction",
        "between 0 and 1",
    );
    fails(
        "[cache]\nheuristic_fraction = nan\n",
        2,
        "cache.heuristic_fraction",
        "between 0 and 1",
    );
    parse("[cache]\nheuristic_fraction = 0\n");
    parse("[cache]\nheuristic_fraction = 1\n");
}

#[test]
fn targeted_field() {
    fails(
        "[cache]\ntargeted_field = \"Cache-Control\"\n",
        2,
        "cache.targeted_field",
        "not a field of this cache's own",
    );
    fails(
        "[cache]\ntargeted_field = \"bad name\"\n",
        2,
        "cache.targeted_field",
        "not a header name",
    );
    assert!(parse("").cache.refuse_set_cookie, "refused by default");
    let c = parse("[cache]\ntargeted_field = \"Weir-Cache-Control\"\nrefuse_set_cookie = false\n");
    assert_eq!(
        c.cache.targeted_field.unwrap().as_str(),
        "weir-cache-control"
    );
    assert!(!c.cache.refuse_set_cookie);
}

#[test]
fn range_fill() {
    assert_eq!(parse("").cache.range_fill, RangeFill::Whole);
    let c = parse("[cache]\nrange_fill = \"parts\"\n");
    assert_eq!(c.cache.range_fill, RangeFill::Parts);
    fails(
        "[cache]\nrange_fill = \"all\"\n",
        2,
        "cache.range_fill",
        "expected `whole` or `parts`",
    );
}

#[test]
fn refresh_rules() {
    fails(
        "[cache]\nheuristic_max = \"2d\"\n\n[[cache.refresh]]\npattern = \"(\"\n",
        5,
        "cache.refresh[0].pattern",
        "not a regular expression",
    );
    fails(
        "[[cache.refresh]]\npattern = \"x\"\npercent = 150\n",
        3,
        "cache.refresh[0].percent",
        "between 0 and 100",
    );
    fails(
        "[[cache.refresh]]\npattern = \"x\"\nmin = \"2h\"\nmax = \"1h\"\n",
        3,
        "cache.refresh[0].min",
        "longer than max",
    );
    let c = parse("[cache]\ncollapse = false\nheuristic_max = \"1d\"\n[[cache.refresh]]\npattern = \"\\\\.jpg$\"\nmin = \"1h\"\n");
    assert!(!c.cache.collapse);
    assert_eq!(c.cache.heuristic_max.0.as_secs(), 86400);
    assert_eq!(c.cache.refresh[0].min.0.as_secs(), 3600);
}

#[test]
fn upstream_connections() {
    fails(
        "[upstream]\nmax_connections_per_origin = 0\n",
        2,
        "upstream.max_connections_per_origin",
        "at least 1",
    );
}

#[test]
fn safe_ports() {
    let head = "[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\n";
    fails(
        &format!("{head}safe_ports = [80,\n  \"1025-x\"]\n"),
        5,
        "listen[0].safe_ports[1]",
        "is not a port or a range",
    );
    fails(
        &format!("{head}safe_ports = [0]\n"),
        4,
        "listen[0].safe_ports[0]",
        "port 0 is not between 1 and 65535",
    );
    let c = parse(&format!("{head}safe_ports = [80, \"8000-8999\"]\n"));
    assert_eq!(c.listen[0].safe_port_ranges(), [80..=80, 8000..=8999]);
    let c = parse(head);
    let default = c.listen[0].safe_port_ranges();
    assert!(default.iter().any(|r| r.contains(&80)) && default.iter().any(|r| r.contains(&8080)));
    assert!(!default.iter().any(|r| r.contains(&22)));
}

#[test]
fn connect_ports_nonzero() {
    let text =
        "[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\nconnect_ports = [443,\n  0]\n";
    fails(text, 5, "listen[0].connect_ports[1]", "port 0");
}

#[test]
fn request_header_limit() {
    let key = "limits.max_request_header";
    fails(
        "[limits]\nmax_request_header = \"1023B\"\n",
        2,
        key,
        "between 1KiB and 1MiB",
    );
    fails(
        "[limits]\nmax_request_header = \"2MiB\"\n",
        2,
        key,
        "between 1KiB and 1MiB",
    );
    parse("[limits]\nmax_request_header = \"1KiB\"\n");
    parse("[limits]\nmax_request_header = \"1MiB\"\n");
}

#[test]
fn access_log_nonempty() {
    fails(
        "[log]\naccess = \"\"\n",
        2,
        "log.access",
        "must not be empty",
    );
    fails(
        "[log]\naccess = \"  \"\n",
        2,
        "log.access",
        "must not be empty",
    );
}

#[test]
fn first_error_in_the_file_wins() {
    let text = "[log]\naccess = \"\"\n[cache]\nmemory = 0\n";
    fails(text, 2, "log.access", "must not be empty");
    let text = "[cache]\nmemory = 0\n[log]\naccess = \"\"\n";
    fails(text, 2, "cache.memory", "greater than 0");
}

#[test]
fn validate_without_a_file() {
    let mut c = Config::default();
    c.upstream.max_connections_per_origin = 0;
    let e = c.validate().unwrap_err();
    assert_eq!(e.line, None);
    assert_eq!(
        e.key.as_deref(),
        Some("upstream.max_connections_per_origin")
    );
}

#[test]
fn key_paths_quote_unusual_keys() {
    fails("\"a.b\" = 1\n", 1, "\"a.b\"", "unknown field");
}

#[test]
fn a_reachable_admin_listener_needs_a_token() {
    fails(
        "[admin]\n# open to the network\nlisten = \"0.0.0.0:9090\"\n",
        3,
        "admin.listen",
        "set `[admin] token`",
    );
    let c = parse("[admin]\nlisten = \"0.0.0.0:9090\"\ntoken = \"s3cret\"\n");
    assert_eq!(c.admin.token, Some(AdminToken("s3cret".into())));
    assert!(
        !format!("{c:?}").contains("s3cret"),
        "the token is not printed"
    );
    parse("[admin]\nlisten = \"[::1]:9090\"\n");
    fails(
        "[admin]\ntoken = \"\"\n",
        2,
        "admin.token",
        "must not be empty",
    );
    fails("[admin]\ntoken = \"a b\"\n", 2, "admin.token", "spaces");
}

#[test]
fn purge_networks_and_tag_headers() {
    let c = Config::default();
    let from: Vec<String> = c.cache.purge_from.iter().map(|n| n.to_string()).collect();
    assert_eq!(from, ["127.0.0.0/8", "::1/128"]);
    assert_eq!(c.cache.tag_headers, ["surrogate-key", "cache-tag"]);
    let c = parse(
        "[cache]\npurge_from = [\"10.0.0.0/8\", \"192.0.2.7\"]\ntag_headers = [\"X-Tags\"]\n",
    );
    assert_eq!(c.cache.purge_from.len(), 2);
    assert_eq!(c.cache.tag_headers, ["x-tags"]);
    fails(
        "[cache]\npurge_from = [\"10.0.0.0/8\",\n  \"nope\"]\n",
        3,
        "cache.purge_from[1]",
        "not a network",
    );
    fails(
        "[cache]\ntag_headers = [\n  \"Surrogate-Key\",\n  \"bad header\",\n]\n",
        4,
        "cache.tag_headers[1]",
        "not a header name",
    );
}
