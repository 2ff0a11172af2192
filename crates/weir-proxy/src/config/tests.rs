use super::*;

mod listeners;
mod modules;
mod origins;
mod semantic;
mod support;

use support::{addr, fails, parse, TWO_LISTENERS};

const EXAMPLE: &str = include_str!("../../../../weir.example.toml");

#[test]
fn defaults() {
    let c = Config::default();
    assert_eq!(c.listen.len(), 1);
    let l = &c.listen[0];
    assert_eq!(l.addr, addr("127.0.0.1:3128"));
    assert_eq!(l.mode, ListenMode::Forward);
    let allow: Vec<String> = l.allow.iter().map(|n| n.to_string()).collect();
    assert_eq!(allow, ["127.0.0.0/8", "::1/128"]);
    assert_eq!(l.connect_ports, [443]);
    assert!(l.origin.is_none() && l.route.is_empty());
    assert_eq!(c.admin.listen, Some(addr("127.0.0.1:9090")));
    assert_eq!(c.cache.memory, ByteSize(256 << 20));
    assert_eq!(c.cache.max_object, ByteSize(64 << 20));
    assert_eq!(c.log.destination(), LogDestination::Off);
    assert_eq!(c.server.scheduler, Scheduler::PerCore);
    assert_eq!(
        parse("[server]\nscheduler = \"work-stealing\"\n")
            .server
            .scheduler,
        Scheduler::WorkStealing
    );
    c.validate().unwrap();
}

#[test]
fn empty_file_is_the_defaults() {
    let c = parse("");
    assert_eq!(c.source, "weir.toml");
    let d = Config {
        source: "weir.toml".into(),
        ..Config::default()
    };
    assert_eq!(format!("{c:?}"), format!("{d:?}"));
    assert_eq!(Config::default().source, "<defaults>");
}

#[test]
fn example_file_parses() {
    let c = parse(EXAMPLE);
    assert_eq!(c.listen.len(), 2);
    assert_eq!(c.listen[0].mode, ListenMode::Forward);
    let reverse = &c.listen[1];
    assert_eq!(reverse.mode, ListenMode::Reverse);
    assert_eq!(reverse.addr, addr("127.0.0.1:8080"));
    assert_eq!(reverse.origin.as_deref(), Some("http://127.0.0.1:8081"));
    assert_eq!(reverse.route[0].host.as_deref(), Some("img.example"));
    assert_eq!(reverse.route[0].origin, "http://127.0.0.1:8082");
    assert_eq!(reverse.route[1].host, None);
    assert_eq!(reverse.route[1].path_prefix, "/api/");
    assert_eq!(
        reverse.modules.as_deref(),
        Some(&["add-headers".to_string()][..])
    );
    assert_eq!(c.module.len(), 1);
    let m = &c.module[0];
    assert_eq!(m.name, "add-headers");
    assert!(!m.enabled && !m.optional);
    assert_eq!(m.settings.get("value").and_then(|v| v.as_str()), Some("1"));
    assert_eq!(c.origin.len(), 1);
    assert_eq!(c.origin[0].url, "http://127.0.0.1:8081");
}

/// The example claims to show every default; keep it honest.
#[test]
fn example_file_shows_the_defaults() {
    let (c, d) = (parse(EXAMPLE), Config::default());
    assert_eq!(format!("{:?}", c.admin), format!("{:?}", d.admin));
    assert_eq!(format!("{:?}", c.listen[0]), format!("{:?}", d.listen[0]));
    assert_eq!(format!("{:?}", c.cache), format!("{:?}", d.cache));
    assert_eq!(format!("{:?}", c.limits), format!("{:?}", d.limits));
    assert_eq!(format!("{:?}", c.timeouts), format!("{:?}", d.timeouts));
    assert_eq!(format!("{:?}", c.upstream), format!("{:?}", d.upstream));
    assert_eq!(format!("{:?}", c.log), format!("{:?}", d.log));
    assert_eq!(format!("{:?}", c.server), format!("{:?}", d.server));
    // There are no modules by default; the example's are shown disabled, so that the
    // example runs as the defaults do.
    assert!(d.module.is_empty());
    assert!(c.module.iter().all(|m| !m.enabled), "{:?}", c.module);
    // The example's [[origin]] shows the defaults an origin without a section gets.
    assert!(d.origin.is_empty());
    let o = &c.origin[0];
    assert_eq!(o.protocol, OriginProtocol::default());
    assert!(o.ca_file.is_none() && o.tls_verify.is_none());
}

#[test]
fn admin_off_and_bare_allow_addresses() {
    fails(
        "[admin]\nlisten = \"on\"\n",
        2,
        "admin.listen",
        "or \"off\"",
    );
    fails(
        "[admin]\nlisten = 9090\n",
        2,
        "admin.listen",
        "127.0.0.1:9090",
    );
    let c = parse("[admin]\nlisten = \"off\"\n[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\nallow = [\"10.1.2.3\", \"::1\", \"192.168.0.0/16\"]\n");
    assert_eq!(c.admin.listen, None);
    let allow: Vec<String> = c.listen[0].allow.iter().map(|n| n.to_string()).collect();
    assert_eq!(allow, ["10.1.2.3/32", "::1/128", "192.168.0.0/16"]);
}

#[test]
fn display_format() {
    let e = ConfigError {
        file: "weir.toml".into(),
        line: Some(7),
        key: Some("listen[0].origin".into()),
        message: "oops".into(),
    };
    assert_eq!(e.to_string(), "weir.toml:7: key `listen[0].origin`: oops");
    let e = Config::parse("[cache]\nmemory = \"12 parsecs\"\n", "/etc/weir.toml").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/etc/weir.toml:2: key `cache.memory`: `12 parsecs`"),
        "{e}"
    );
}

// Parse and type errors.

#[test]
fn unknown_keys() {
    fails(
        "[cache]\nmemory = 1\nmemroy = 2\n",
        3,
        "cache.memroy",
        "unknown field",
    );
    fails("colour = \"blue\"\n", 1, "colour", "unknown field `colour`");
    let text = format!("{TWO_LISTENERS}  weight = 3\n");
    fails(
        &text,
        11,
        "listen[1].route[0].weight",
        "unknown field `weight`",
    );
}

#[test]
fn wrong_types() {
    let text = TWO_LISTENERS.replace("mode = \"reverse\"", "mode = 5");
    fails(&text, 7, "listen[1].mode", "string");
    fails(
        "[upstream]\nmax_idle_per_origin = \"lots\"\n",
        2,
        "upstream.max_idle_per_origin",
        "invalid type",
    );
    fails("cache = 5\n", 1, "cache", "invalid type");
    fails(
        "[log]\nformat = \"json\"\n",
        2,
        "log.format",
        "unknown variant",
    );
    let text = TWO_LISTENERS.replace("127.0.0.1:8080", "localhost:8080");
    fails(&text, 6, "listen[1].addr", "address");
}

#[test]
fn bad_values_in_arrays_and_inline_tables() {
    fails(
        "[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\nallow = [\n  \"10.0.0.0/8\",\n  \"10.0.0.0/33\",\n]\n",
        6,
        "listen[0].allow[1]",
        "10.0.0.0/33",
    );
    fails(
        "listen = [{ addr = \"127.0.0.1:1\", mode = \"forward\" },\n  { addr = \"127.0.0.1:2\", mode = \"sideways\" }]\n",
        2,
        "listen[1].mode",
        "unknown variant",
    );
}

#[test]
fn bad_units() {
    fails(
        "[cache]\nmemory = \"12 parsecs\"\n",
        2,
        "cache.memory",
        "unknown size unit",
    );
    fails(
        "[cache]\n\nmax_object = -1\n",
        3,
        "cache.max_object",
        "negative",
    );
    fails(
        "[timeouts]\nconnect = \"5 fortnights\"\n",
        2,
        "timeouts.connect",
        "time unit",
    );
    fails(
        "[timeouts]\nconnect = -5\n",
        2,
        "timeouts.connect",
        "between 0 and",
    );
    fails(
        "[limits]\nmodule_body_total = \"1MiB\"\n",
        2,
        "limits.module_body_total",
        "at least limits.module_body",
    );
    fails(
        "[timeouts]\nclient_body_idle = \"0s\"\n",
        2,
        "timeouts.client_body_idle",
        "greater than 0",
    );
    fails(
        "[timeouts]\ntunnel_idle = \"0s\"\n",
        2,
        "timeouts.tunnel_idle",
        "greater than 0",
    );
}

#[test]
fn missing_field_names_the_field() {
    let text = TWO_LISTENERS.replace("mode = \"reverse\"\n", "");
    fails(&text, 5, "listen[1].mode", "missing field `mode`");
}

#[test]
fn syntax_errors() {
    fails(
        "[cache]\nmemory = 1\nmemory = 2\n",
        3,
        "cache.memory",
        "duplicate key",
    );
    fails(
        "[admin]\n\n[cache]\nmemory = 1\nmemory = 2\n",
        5,
        "cache.memory",
        "duplicate key",
    );
    fails("top = 1\ntop = 2\n", 2, "top", "duplicate key");
    fails(
        "[[listen]]\naddr = \"127.0.0.1:1\"\nmode = \n",
        3,
        "listen[0].mode",
        "",
    );
    // Recovery cannot keep an unterminated value, so only its table is named.
    fails("[cache]\nmemory = \"1MiB\n", 2, "cache", "");
    let e = Config::parse("[cache\nmemory = 1\n", "weir.toml").unwrap_err();
    assert_eq!(e.line, Some(1), "{e}");
}

#[test]
fn disk_tier_settings() {
    let c = parse("[cache]\ndisk = \"off\"\n");
    assert_eq!(c.cache.disk, DiskConfig::Off);
    // A directory this process may make (checked, not made: config/paths.rs).
    let dir = std::env::temp_dir().join("weir-config-test/cache");
    let c = parse(&format!(
        "[cache]\ndisk = {{ path = {:?}, size = \"10GiB\" }}\nmax_object = \"2GiB\"\n",
        dir.display().to_string()
    ));
    assert_eq!(
        c.cache.disk,
        DiskConfig::On {
            path: dir,
            size: ByteSize(10 << 30)
        }
    );
    assert_eq!(
        Config::default().cache.disk,
        DiskConfig::On {
            path: "weir-cache".into(),
            size: ByteSize(1 << 30)
        }
    );
    fails(
        "[cache]\ndisk = \"on\"\n",
        2,
        "cache.disk",
        "expected \"off\"",
    );
    fails(
        "[cache]\n\ndisk = { path = \"d\" }\n",
        3,
        "cache.disk",
        "expected \"off\"",
    );
    fails(
        "[cache]\ndisk = { path = \"d\", size = 0 }\n",
        2,
        "cache.disk",
        "greater than 0",
    );
    fails(
        "[cache]\nmax_object = \"2GiB\"\ndisk = { path = \"d\", size = \"1GiB\" }\n",
        2,
        "cache.max_object",
        "disk size",
    );
    fails(
        "[cache]\nmax_memory_object = \"1GiB\"\n",
        2,
        "cache.max_memory_object",
        "memory",
    );
    fails(
        "[cache]\nmax_memory_object = \"8MiB\"\nfill_memory = \"4MiB\"\n",
        3,
        "cache.fill_memory",
        "at least the largest object kept in memory",
    );
    fails(
        "[cache]\nmax_object = \"8MiB\"\ndisk = \"off\"\nfill_memory = \"1MiB\"\n",
        4,
        "cache.fill_memory",
        "no disk tier",
    );
    fails(
        "[cache]\nstale_if_error = \"soon\"\n",
        2,
        "cache.stale_if_error",
        "soon",
    );
}
