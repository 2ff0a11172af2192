//! Semantic checks: things serde accepts but Weir cannot run with.

use std::net::SocketAddr;

use super::cache::DiskConfig;
use super::error::Issue;
use super::listen::{ListenConfig, ListenMode};
use super::origin::OriginUrl;
use super::paths::{access_log_problem, disk_dir_problem};
use super::process::LogDestination;
use super::spans::KeyPath;
use super::whole::Config;

const MIN_REQUEST_HEADER: u64 = 1 << 10;
const MAX_REQUEST_HEADER: u64 = 1 << 20;

/// Every semantic problem in `config`, in no particular order.
pub(crate) fn check(config: &Config) -> Vec<Issue> {
    let mut issues = Vec::new();
    let mut report = |keys: Vec<KeyPath>, message: String| issues.push(Issue { keys, message });

    if config.listen.is_empty() {
        report(
            vec![KeyPath::top("listen")],
            "at least one [[listen]] is needed".into(),
        );
    }
    for (i, listener) in config.listen.iter().enumerate() {
        let at = KeyPath::top("listen").index(i);
        match listener.mode {
            ListenMode::Reverse => {
                if listener.origin.is_none() {
                    report(
                        vec![at.clone().key("origin")],
                        "a reverse listener needs an `origin` for requests no route matches".into(),
                    );
                }
            }
            ListenMode::Forward | ListenMode::Transparent => {
                if listener.origin.is_some() {
                    report(
                        vec![at.clone().key("origin")],
                        "only a reverse listener has an `origin`".into(),
                    );
                }
                if !listener.route.is_empty() {
                    report(
                        vec![at.clone().key("route")],
                        "only a reverse listener has routes".into(),
                    );
                }
            }
        }
        if let Some(origin) = &listener.origin {
            if let Err(e) = OriginUrl::parse(origin) {
                report(vec![at.clone().key("origin")], e);
            }
        }
        for (j, route) in listener.route.iter().enumerate() {
            let at = at.clone().key("route").index(j);
            if let Err(e) = OriginUrl::parse(&route.origin) {
                report(vec![at.clone().key("origin")], e);
            }
            if !route.path_prefix.starts_with('/') {
                report(
                    vec![at.clone().key("path_prefix")],
                    format!("`{}` must start with `/`", route.path_prefix),
                );
            }
            if route.host.as_deref().is_some_and(|h| h.trim().is_empty()) {
                report(
                    vec![at.clone().key("host")],
                    "an empty host matches nothing; leave `host` out to match any host".into(),
                );
            }
            for (k, name) in route.modules.iter().flatten().enumerate() {
                if !config.module.iter().any(|module| module.name == *name) {
                    report(
                        vec![at.clone().key("modules").index(k)],
                        format!("no [[module]] named `{name}`"),
                    );
                }
            }
        }
        for (k, name) in listener.modules.iter().flatten().enumerate() {
            if !config.module.iter().any(|module| module.name == *name) {
                report(
                    vec![at.clone().key("modules").index(k)],
                    format!("no [[module]] named `{name}`"),
                );
            }
        }
        check_listener_tls(listener, &at, &mut report);
        for (k, port) in listener.safe_ports.iter().enumerate() {
            if let Err(e) = port.range() {
                report(vec![at.clone().key("safe_ports").index(k)], e);
            }
        }
        for (k, port) in listener.connect_ports.iter().enumerate() {
            if *port == 0 {
                report(
                    vec![at.clone().key("connect_ports").index(k)],
                    "port 0 cannot be tunnelled to".into(),
                );
            }
        }
    }
    check_addresses(config, &mut report);
    check_modules(config, &mut report);
    let mut cluster_issues = Vec::new();
    if let Some(cluster) = &config.cluster {
        super::cluster::check(cluster, &mut cluster_issues);
        let peer = cluster.peer_addr;
        if config.listen.iter().any(|l| l.addr == peer) || config.admin.listen == Some(peer) {
            cluster_issues.push(Issue {
                keys: vec![KeyPath::top("cluster").key("peer_addr")],
                message: format!("{peer} is already a listener's or the admin listener's address"),
            });
        }
    }
    for issue in cluster_issues {
        report(issue.keys, issue.message);
    }

    let cache = &config.cache;
    if cache.memory.0 == 0 {
        report(
            vec![KeyPath::top("cache").key("memory")],
            "must be greater than 0".into(),
        );
    } else if cache.max_object > cache.memory && cache.disk == DiskConfig::Off {
        report(
            vec![
                KeyPath::top("cache").key("max_object"),
                KeyPath::top("cache").key("memory"),
            ],
            format!(
                "max_object ({} bytes) must not exceed memory ({} bytes)",
                cache.max_object.0, cache.memory.0
            ),
        );
    }
    if let DiskConfig::On { path, size } = &cache.disk {
        let at = KeyPath::top("cache").key("disk");
        if path.as_os_str().is_empty() {
            report(vec![at.clone()], "`path` must not be empty".into());
        } else if let Some(problem) = disk_dir_problem(path) {
            // The disk tier would start without storing anything; say so now.
            report(vec![at.clone()], problem);
        }
        if size.0 == 0 {
            report(vec![at.clone()], "`size` must be greater than 0".into());
        } else if cache.max_object > *size {
            report(
                vec![KeyPath::top("cache").key("max_object"), at],
                format!(
                    "max_object ({} bytes) must not exceed the disk size ({} bytes)",
                    cache.max_object.0, size.0
                ),
            );
        }
        if cache.max_memory_object > cache.memory {
            report(
                vec![
                    KeyPath::top("cache").key("max_memory_object"),
                    KeyPath::top("cache").key("memory"),
                ],
                format!(
                    "max_memory_object ({} bytes) must not exceed memory ({} bytes)",
                    cache.max_memory_object.0, cache.memory.0
                ),
            );
        }
    }
    if let Some(fill) = cache.fill_memory {
        if fill.0 < cache.memory_object_limit() {
            let limit = match cache.disk {
                DiskConfig::Off => "max_object, as there is no disk tier",
                DiskConfig::On { .. } => "max_memory_object",
            };
            report(
                vec![KeyPath::top("cache").key("fill_memory")],
                format!(
                    "fill_memory ({} bytes) must be at least the largest object kept in memory ({} bytes: {limit})",
                    fill.0,
                    cache.memory_object_limit()
                ),
            );
        }
    }
    if !(0.0..=1.0).contains(&cache.heuristic_fraction) {
        report(
            vec![KeyPath::top("cache").key("heuristic_fraction")],
            format!("{} is not between 0 and 1", cache.heuristic_fraction),
        );
    }
    if cache.heuristic_max.0.is_zero() && !cache.refresh.is_empty() {
        report(
            vec![KeyPath::top("cache").key("heuristic_max")],
            "0 makes every refresh rule's default max 0; give each rule its own `max`".into(),
        );
    }
    for (i, rule) in cache.refresh.iter().enumerate() {
        let at = KeyPath::top("cache").key("refresh").index(i);
        if let Err(e) = crate::refresh::compile(rule) {
            report(vec![at.clone().key("pattern")], e);
        }
        if let Some(p) = rule.percent {
            if !(0.0..=100.0).contains(&p) {
                report(
                    vec![at.clone().key("percent")],
                    format!("{p} is not between 0 and 100"),
                );
            }
        }
        let max = rule.max.unwrap_or(cache.heuristic_max);
        if rule.min.0 > max.0 {
            report(
                vec![at.clone().key("min")],
                format!("min ({:?}) is longer than max ({:?})", rule.min.0, max.0),
            );
        }
    }
    if let Some(field) = &cache.targeted_field {
        if field == http::header::CACHE_CONTROL || field.as_str() == "cdn-cache-control" {
            report(
                vec![KeyPath::top("cache").key("targeted_field")],
                format!(
                    "`{field}` is not a field of this cache's own: name one such as \
                     \"Weir-Cache-Control\" (CDN-Cache-Control is obeyed after it anyway)"
                ),
            );
        }
    }

    for (key, value) in [
        ("origin_body_idle", config.timeouts.origin_body_idle),
        ("client_body_idle", config.timeouts.client_body_idle),
        ("tunnel_idle", config.timeouts.tunnel_idle),
    ] {
        if value.0.is_zero() {
            report(
                vec![KeyPath::top("timeouts").key(key)],
                "must be greater than 0".into(),
            );
        }
    }
    if config.limits.module_body_total.0 < config.limits.module_body.0 {
        report(
            vec![KeyPath::top("limits").key("module_body_total")],
            "must be at least limits.module_body".into(),
        );
    }
    if config.limits.module_wait.0.is_zero() {
        report(
            vec![KeyPath::top("limits").key("module_wait")],
            "must be greater than 0".into(),
        );
    }
    let header = config.limits.max_request_header.0;
    if !(MIN_REQUEST_HEADER..=MAX_REQUEST_HEADER).contains(&header) {
        report(
            vec![KeyPath::top("limits").key("max_request_header")],
            format!("{header} bytes is not between 1KiB and 1MiB"),
        );
    }

    if config.timeouts.client_handshake.0.is_zero() {
        report(
            vec![KeyPath::top("timeouts").key("client_handshake")],
            "must be greater than 0".into(),
        );
    }

    if config.upstream.max_connections_per_origin == 0 {
        report(
            vec![KeyPath::top("upstream").key("max_connections_per_origin")],
            "must be at least 1".into(),
        );
    }
    if config.upstream.max_h2_connections_per_origin == 0 {
        report(
            vec![KeyPath::top("upstream").key("max_h2_connections_per_origin")],
            "must be at least 1".into(),
        );
    }
    super::origin::check(&config.origin, &mut report);

    if config.server.workers > 1024 {
        report(
            vec![KeyPath::top("server").key("workers")],
            format!("{} worker threads is more than 1024", config.server.workers),
        );
    }

    if let Some(addr) = config.admin.listen {
        if !addr.ip().is_loopback() && config.admin.token.is_none() {
            report(
                vec![
                    KeyPath::top("admin").key("token"),
                    KeyPath::top("admin").key("listen"),
                ],
                format!(
                    "the admin listener on {addr} is reachable from other hosts: set \
                     `[admin] token` so that its content API needs it"
                ),
            );
        }
    }

    if config.log.access.trim().is_empty() {
        report(
            vec![KeyPath::top("log").key("access")],
            "must not be empty (use \"off\" to disable the access log)".into(),
        );
    } else if let LogDestination::File(path) = config.log.destination() {
        if let Some(problem) = access_log_problem(&path) {
            report(vec![KeyPath::top("log").key("access")], problem);
        }
    }
    issues
}

/// TLS and the PROXY protocol on one listener: what its mode allows, and every
/// certificate and key loadable and matching (read from disk, as startup and reload
/// read them).
fn check_listener_tls(
    listener: &ListenConfig,
    at: &KeyPath,
    report: &mut impl FnMut(Vec<KeyPath>, String),
) {
    if listener.mode == ListenMode::Transparent {
        if listener.tls.is_some() {
            report(
                vec![at.clone().key("tls")],
                "a transparent listener cannot terminate TLS: it has no certificate for \
                 the hosts its clients meant to reach"
                    .into(),
            );
        }
        if listener.proxy_protocol {
            report(
                vec![at.clone().key("proxy_protocol")],
                "a transparent listener takes its connections from the kernel, not from a \
                 load balancer: `proxy_protocol` does not apply"
                    .into(),
            );
        }
        return;
    }
    let Some(tls) = &listener.tls else { return };
    if let Err(e) = crate::listener::tls::check(tls) {
        let certs = at.clone().key("tls").key("certs");
        let key = match e.index {
            Some(i) => certs.index(i).key(e.field),
            None => certs,
        };
        report(vec![key, at.clone().key("tls")], e.message);
    }
}

/// Two listeners cannot bind the same address. Port 0 asks the kernel for a fresh
/// port each time, so it never collides.
fn check_addresses(config: &Config, report: &mut impl FnMut(Vec<KeyPath>, String)) {
    let admin = config
        .admin
        .listen
        .map(|addr| (addr, "the admin listener".to_string()));
    let listeners = config
        .listen
        .iter()
        .enumerate()
        .map(|(i, l)| (l.addr, format!("listen[{i}]")));
    let mut seen: Vec<(SocketAddr, String)> = Vec::new();
    for (i, (addr, name)) in admin.into_iter().chain(listeners).enumerate() {
        if let Some((_, other)) = seen.iter().find(|(prev, _)| collides(*prev, addr)) {
            // The admin address, when present, is seen first and so is never blamed here.
            let index = i - usize::from(config.admin.listen.is_some());
            let at = KeyPath::top("listen").index(index);
            report(
                vec![at.key("addr")],
                format!("{addr} is already used by {other}"),
            );
        }
        seen.push((addr, name));
    }
}

/// Every `[[module]]` is named, and no two enabled ones share a name (the engine would
/// not know which one a listener's `modules` means). Whether a name is a built-in module
/// is for the engine to say.
fn check_modules(config: &Config, report: &mut impl FnMut(Vec<KeyPath>, String)) {
    for (i, module) in config.module.iter().enumerate() {
        let at = KeyPath::top("module").index(i).key("name");
        if module.name.trim().is_empty() {
            report(
                vec![at],
                "must not be empty: name the module to load".into(),
            );
            continue;
        }
        if !module.enabled {
            continue;
        }
        let first = config.module[..i]
            .iter()
            .position(|other| other.enabled && other.name == module.name);
        if let Some(first) = first {
            report(
                vec![at],
                format!(
                    "module `{}` is configured twice (also as module[{first}]); \
                     set `enabled = false` on one of them",
                    module.name
                ),
            );
        }
    }
}

/// Same port, and either the same IP or an unspecified IP of the same family, which
/// binds every address of that family.
fn collides(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && a.is_ipv4() == b.is_ipv4()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}
