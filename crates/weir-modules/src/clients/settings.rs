//! The `clients` module's section, read and checked. Every error names its key, so
//! `weir check` can point at the line.

use weir_api::serde::Deserialize;
use weir_api::{Settings, SettingsError};

/// Below this, even a streamed 64 KiB chunk would wait longer than the most the module
/// holds one (10 s).
const MIN_BANDWIDTH: u64 = 8 * 1024;
/// More entries than this is a configuration mistake, not a bound.
const MAX_TOP: u64 = 1_000_000;

#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", deny_unknown_fields)]
struct Raw {
    top: Option<i64>,
    by: Option<String>,
    rate: Option<f64>,
    burst: Option<f64>,
    bandwidth: Option<Size>,
    bandwidth_burst: Option<Size>,
    quota: Option<Size>,
    quota_reset: Option<String>,
    concurrent: Option<i64>,
}

/// A number of bytes (`1048576`) or a size (`"1MiB"`, `"100KB"`; powers of 1024).
#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", untagged)]
enum Size {
    Bytes(i64),
    Text(String),
}

/// Whom the limits apply to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LimitBy {
    /// The client's address.
    Client,
    /// The authenticated user; clients without one by address.
    User,
}

/// The module's configuration, checked.
#[derive(Debug, Clone)]
pub(crate) struct ClientsConfig {
    pub top: usize,
    pub by: LimitBy,
    /// Requests per second and bucket size.
    pub rate: Option<(f64, f64)>,
    /// Bytes per second and bucket size.
    pub bandwidth: Option<(f64, f64)>,
    /// Bytes per day, and the reset as seconds after midnight UTC.
    pub quota: Option<(u64, u64)>,
    pub concurrent: Option<u32>,
}

impl ClientsConfig {
    /// Whether any limit is configured (else the module only counts).
    pub(crate) fn limits_requests(&self) -> bool {
        self.rate.is_some() || self.quota.is_some() || self.concurrent.is_some()
    }
}

pub(crate) fn read(settings: &Settings) -> Result<ClientsConfig, SettingsError> {
    let raw: Raw = settings.get()?;
    let top = match raw.top {
        None => 1000,
        Some(n) if (1..=MAX_TOP as i64).contains(&n) => n as usize,
        Some(_) => {
            return Err(SettingsError::at(
                "top",
                format!("must be between 1 and {MAX_TOP}"),
            ))
        }
    };
    let by = match raw.by.as_deref() {
        None | Some("client") => LimitBy::Client,
        Some("user") => LimitBy::User,
        Some(other) => {
            return Err(SettingsError::at(
                "by",
                format!("`{other}` is neither \"client\" nor \"user\""),
            ))
        }
    };
    let rate = match raw.rate {
        None => {
            if raw.burst.is_some() {
                return Err(SettingsError::at("burst", "only applies with `rate`"));
            }
            None
        }
        Some(r) if r.is_finite() && r > 0.0 => {
            let burst = raw.burst.unwrap_or(r.max(1.0));
            if !(burst.is_finite() && burst >= 1.0) {
                return Err(SettingsError::at("burst", "must be at least 1 request"));
            }
            Some((r, burst))
        }
        Some(_) => {
            return Err(SettingsError::at(
                "rate",
                "must be a positive number of requests per second",
            ))
        }
    };
    let bandwidth = match raw.bandwidth {
        None => {
            if raw.bandwidth_burst.is_some() {
                return Err(SettingsError::at(
                    "bandwidth_burst",
                    "only applies with `bandwidth`",
                ));
            }
            None
        }
        Some(size) => {
            let rate = bytes("bandwidth", size)?;
            if rate < MIN_BANDWIDTH {
                return Err(SettingsError::at(
                    "bandwidth",
                    format!("must be at least {MIN_BANDWIDTH} bytes per second"),
                ));
            }
            // A tenth of a second's worth: short answers pass at once, long ones
            // settle at the rate within moments.
            let burst = match raw.bandwidth_burst {
                Some(b) => bytes("bandwidth_burst", b)?,
                None => (rate / 10).max(MIN_BANDWIDTH),
            };
            Some((rate as f64, burst as f64))
        }
    };
    let quota = match raw.quota {
        None => {
            if raw.quota_reset.is_some() {
                return Err(SettingsError::at(
                    "quota_reset",
                    "only applies with `quota`",
                ));
            }
            None
        }
        Some(size) => {
            let quota = bytes("quota", size)?;
            if quota == 0 {
                return Err(SettingsError::at("quota", "must be more than zero bytes"));
            }
            let reset = match raw.quota_reset.as_deref() {
                None => 0,
                Some(text) => time_of_day(text).ok_or_else(|| {
                    SettingsError::at(
                        "quota_reset",
                        format!("`{text}` is not a time of day as \"HH:MM\" (UTC)"),
                    )
                })?,
            };
            Some((quota, reset))
        }
    };
    let concurrent = match raw.concurrent {
        None => None,
        Some(n) if (1..=u32::MAX as i64).contains(&n) => Some(n as u32),
        Some(_) => {
            return Err(SettingsError::at(
                "concurrent",
                "must be at least 1 request in flight",
            ))
        }
    };
    Ok(ClientsConfig {
        top,
        by,
        rate,
        bandwidth,
        quota,
        concurrent,
    })
}

fn bytes(key: &str, size: Size) -> Result<u64, SettingsError> {
    match size {
        Size::Bytes(n) => {
            u64::try_from(n).map_err(|_| SettingsError::at(key, "a size cannot be negative"))
        }
        Size::Text(text) => parse_size(&text).ok_or_else(|| {
            SettingsError::at(
                key,
                format!("`{text}` is not a size (e.g. \"100KiB\", \"1GiB\")"),
            )
        }),
    }
}

/// `"100KB"`, `"1 GiB"`, `"512"`: units are powers of 1024, as in the rest of the
/// configuration.
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number.parse().ok()?;
    let unit: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(unit)
}

/// `"HH:MM"` as seconds after midnight.
fn time_of_day(text: &str) -> Option<u64> {
    let (h, m) = text.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (u64, u64) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 3600 + m * 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> SettingsError {
        read(&Settings::parse(text).unwrap()).unwrap_err()
    }

    #[test]
    fn defaults_count_only() {
        let c = read(&Settings::default()).unwrap();
        assert_eq!(c.top, 1000);
        assert_eq!(c.by, LimitBy::Client);
        assert!(!c.limits_requests() && c.bandwidth.is_none());
    }

    #[test]
    fn limits_read_with_units_and_defaults() {
        let c = read(
            &Settings::parse(
                "by = \"user\"\nrate = 5\nbandwidth = \"100KiB\"\nquota = \"1GB\"\n\
                 quota_reset = \"04:30\"\nconcurrent = 3",
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(c.by, LimitBy::User);
        assert_eq!(c.rate, Some((5.0, 5.0)));
        assert_eq!(c.bandwidth, Some((102400.0, 10240.0)));
        assert_eq!(c.quota, Some((1 << 30, 4 * 3600 + 30 * 60)));
        assert_eq!(c.concurrent, Some(3));
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            ("top = 0", "top"),
            ("by = \"host\"", "by"),
            ("rate = -1", "rate"),
            ("burst = 3", "burst"),
            ("rate = 1\nburst = 0.5", "burst"),
            ("bandwidth = \"10 parsecs\"", "bandwidth"),
            ("bandwidth = 100", "bandwidth"),
            ("quota = 0", "quota"),
            ("quota = \"1GiB\"\nquota_reset = \"25:00\"", "quota_reset"),
            ("quota_reset = \"01:00\"", "quota_reset"),
            ("concurrent = 0", "concurrent"),
        ] {
            assert_eq!(error(text).key.as_deref(), Some(key), "{text}");
        }
    }
}
