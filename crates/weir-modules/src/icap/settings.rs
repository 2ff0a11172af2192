//! The `icap` module's settings: one or more services, each checked when the module
//! is built so that errors name their key.

use std::time::Duration;

use weir_api::serde::Deserialize;
use weir_api::{Settings, SettingsError};

use super::options::IcapMethod;

#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", deny_unknown_fields)]
struct IcapSettings {
    service: Vec<ServiceSettings>,
}

#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", deny_unknown_fields)]
struct ServiceSettings {
    #[serde(default)]
    reqmod: Option<String>,
    #[serde(default)]
    respmod: Option<String>,
    #[serde(default)]
    on_failure: Option<String>,
    #[serde(default)]
    on_oversize: Option<String>,
    #[serde(default)]
    connect_timeout: Option<Duration_>,
    #[serde(default)]
    timeout: Option<Duration_>,
    #[serde(default)]
    retry_after: Option<Duration_>,
    #[serde(default)]
    max_connections: Option<usize>,
    #[serde(default)]
    preview: Option<usize>,
    #[serde(default)]
    max_answer: Option<usize>,
}

/// A duration written as a number of seconds or `"500ms"`, `"2s"`, `"1m"`.
#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", untagged)]
pub(crate) enum Duration_ {
    Seconds(f64),
    Text(String),
}

/// What a service that cannot be used (down, too slow, a malformed answer, an error
/// status) means for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The message goes on unadapted.
    Bypass,
    /// The client gets `503 Service Unavailable`.
    FailClosed,
}

/// One service, checked.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// REQMOD or RESPMOD.
    pub method: IcapMethod,
    /// The `icap://host:port/service` URL as written.
    pub url: String,
    /// `host:port`, to connect to and for the `Host` header.
    pub authority: String,
    /// When the service fails.
    pub on_failure: Policy,
    /// When the body is larger than `[limits] module_body` and the service wants
    /// more of it than the module has.
    pub on_oversize: Policy,
    /// Connecting.
    pub connect_timeout: Duration,
    /// One whole exchange, from taking a connection to the last byte of the answer.
    pub timeout: Duration,
    /// After the service could not be reached or timed out, how long messages are
    /// not sent to it (the failure policy applies at once); zero: always try.
    pub retry_after: Duration,
    /// The most connections open to the service at once.
    pub max_connections: usize,
    /// A preview size that overrides what the service's OPTIONS ask for.
    pub preview: Option<usize>,
    /// The largest answer body accepted.
    pub max_answer: usize,
}

/// The checked list of services, in the order written.
pub fn parse(settings: &Settings) -> Result<Vec<ServiceConfig>, SettingsError> {
    let s: IcapSettings = settings.get()?;
    if s.service.is_empty() {
        return Err(SettingsError::at("service", "name at least one service"));
    }
    s.service
        .into_iter()
        .enumerate()
        .map(|(i, svc)| service(&format!("service[{i}]"), svc))
        .collect()
}

fn service(at: &str, s: ServiceSettings) -> Result<ServiceConfig, SettingsError> {
    let key = |k: &str| format!("{at}.{k}");
    let (method, url, url_key) = match (s.reqmod, s.respmod) {
        (Some(u), None) => (IcapMethod::Reqmod, u, key("reqmod")),
        (None, Some(u)) => (IcapMethod::Respmod, u, key("respmod")),
        _ => {
            return Err(SettingsError::at(
                at,
                "set exactly one of `reqmod` and `respmod` (one service per method)",
            ))
        }
    };
    let authority = authority(&url).map_err(|m| SettingsError::at(&url_key, m))?;
    let policy = |name: &str, v: Option<String>, default| match v.as_deref() {
        None => Ok(default),
        Some("bypass") => Ok(Policy::Bypass),
        Some("fail-closed") => Ok(Policy::FailClosed),
        Some(other) => Err(SettingsError::at(
            key(name),
            format!("`{other}`: use \"bypass\" or \"fail-closed\""),
        )),
    };
    let any_duration = |name: &str, v: Option<Duration_>, default: Duration| {
        match v {
            None => Ok(default),
            Some(Duration_::Seconds(s)) => duration_of(s),
            Some(Duration_::Text(t)) => parse_duration(&t),
        }
        .map_err(|m| SettingsError::at(key(name), m))
    };
    let duration = |name: &str, v: Option<Duration_>, default: Duration| {
        let d = any_duration(name, v, default)?;
        if d.is_zero() {
            return Err(SettingsError::at(key(name), "must be more than zero"));
        }
        Ok(d)
    };
    let max_connections = s.max_connections.unwrap_or(16);
    if max_connections == 0 {
        return Err(SettingsError::at(key("max_connections"), "at least 1"));
    }
    let max_answer = s.max_answer.unwrap_or(16 << 20);
    if max_answer == 0 {
        return Err(SettingsError::at(key("max_answer"), "at least 1 byte"));
    }
    Ok(ServiceConfig {
        method,
        url,
        authority,
        on_failure: policy("on_failure", s.on_failure, Policy::Bypass)?,
        on_oversize: policy("on_oversize", s.on_oversize, Policy::Bypass)?,
        connect_timeout: duration("connect_timeout", s.connect_timeout, Duration::from_secs(2))?,
        timeout: duration("timeout", s.timeout, Duration::from_secs(10))?,
        retry_after: any_duration("retry_after", s.retry_after, Duration::from_secs(5))?,
        max_connections,
        preview: s.preview,
        max_answer,
    })
}

/// `host:port` of an `icap://host[:port]/service` URL (port 1344 by default).
fn authority(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("icap://")
        .ok_or_else(|| format!("`{url}` is not an icap:// URL"))?;
    let (host_port, path) = rest.split_once('/').unwrap_or((rest, ""));
    if path.is_empty() {
        return Err(format!(
            "`{url}` names no service (icap://host:port/service)"
        ));
    }
    if host_port.is_empty() || host_port.contains('@') || url.contains(char::is_whitespace) {
        return Err(format!("`{url}` has no usable host"));
    }
    let has_port = match host_port.rsplit_once(':') {
        // An IPv6 literal without a port ends in `]`.
        Some((_, port)) if !port.ends_with(']') => {
            port.parse::<u16>()
                .map_err(|_| format!("`{url}` has a bad port"))?;
            true
        }
        _ => false,
    };
    Ok(if has_port {
        host_port.to_string()
    } else {
        format!("{host_port}:1344")
    })
}

pub(crate) fn duration_of(seconds: f64) -> Result<Duration, String> {
    if !(0.0..=86_400.0).contains(&seconds) {
        return Err(format!("{seconds} is out of range (0 to one day)"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. \"2s\", \"500ms\")"))?;
    let scale = match unit.trim() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        _ => return Err(format!("`{text}` has an unknown unit (use ms, s, m)")),
    };
    duration_of(n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> SettingsError {
        parse(&Settings::parse(text).unwrap()).unwrap_err()
    }

    #[test]
    fn a_full_service() {
        let s = parse(
            &Settings::parse(
                "[[service]]\nrespmod = \"icap://10.0.0.1:11344/av\"\non_failure = \"fail-closed\"\n\
                 connect_timeout = \"250ms\"\ntimeout = 3\nretry_after = \"0s\"\nmax_connections = 4\npreview = 0\n\
                 [[service]]\nreqmod = \"icap://scanner/req\"\n",
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(s[0].method, IcapMethod::Respmod);
        assert_eq!(s[0].authority, "10.0.0.1:11344");
        assert_eq!(s[0].on_failure, Policy::FailClosed);
        assert_eq!(s[0].on_oversize, Policy::Bypass);
        assert_eq!(s[0].connect_timeout, Duration::from_millis(250));
        assert_eq!(s[0].timeout, Duration::from_secs(3));
        assert_eq!(s[0].retry_after, Duration::ZERO);
        assert_eq!(s[1].retry_after, Duration::from_secs(5));
        assert_eq!((s[0].max_connections, s[0].preview), (4, Some(0)));
        assert_eq!(s[1].method, IcapMethod::Reqmod);
        assert_eq!(s[1].authority, "scanner:1344");
        assert_eq!(s[1].on_failure, Policy::Bypass);
    }

    #[test]
    fn errors_name_the_key() {
        let key = |t: &str| err(t).key.unwrap();
        assert_eq!(key("service = []"), "service");
        assert_eq!(
            key("[[service]]\nreqmod = \"http://x/y\""),
            "service[0].reqmod"
        );
        assert_eq!(
            key("[[service]]\nrespmod = \"icap://x:99999/y\""),
            "service[0].respmod"
        );
        assert_eq!(
            key("[[service]]\nrespmod = \"icap://x:1344\""),
            "service[0].respmod"
        );
        assert_eq!(
            key("[[service]]\nreqmod = \"icap://x/a\"\nrespmod = \"icap://x/b\""),
            "service[0]"
        );
        assert_eq!(
            key("[[service]]\nreqmod = \"icap://x/a\"\non_failure = \"ignore\""),
            "service[0].on_failure"
        );
        assert_eq!(
            key("[[service]]\nreqmod = \"icap://x/a\"\n[[service]]\nreqmod = \"icap://x/a\"\ntimeout = \"2 weeks\""),
            "service[1].timeout"
        );
        assert_eq!(
            key("[[service]]\nreqmod = \"icap://x/a\"\nmax_connections = 0"),
            "service[0].max_connections"
        );
        assert!(err("[[service]]\nreqmod = \"icap://x/a\"\ncolour = 1")
            .to_string()
            .contains("colour"));
    }
}
