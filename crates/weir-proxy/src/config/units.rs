//! Human-friendly sizes (`"256MiB"`) and durations (`"10s"`) in the configuration.

use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A size in bytes, written as an integer or a string such as `"64MiB"`, `"1GB"`, `"512k"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Parses `"64MiB"`, `"1 GB"`, `"512k"`, `"100"`. Binary and decimal units are both
    /// taken as powers of 1024, as Squid and nginx do.
    pub fn parse(text: &str) -> Result<ByteSize, String> {
        let t = text.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num
            .parse()
            .map_err(|_| format!("`{text}` is not a size (e.g. \"256MiB\")"))?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            "t" | "tb" | "tib" => 1 << 40,
            _ => {
                return Err(format!(
                    "`{text}` has an unknown size unit (use B, KiB, MiB, GiB)"
                ))
            }
        };
        n.checked_mul(mult)
            .map(ByteSize)
            .ok_or_else(|| format!("`{text}` is too large"))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a size such as \"256MiB\" or a number of bytes")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration, written as a number of seconds or a string such as `"500ms"`, `"10s"`,
/// `"2m"`, `"3d"`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Seconds(pub Duration);

impl Seconds {
    /// A duration of `s` seconds.
    pub fn from_secs(s: f64) -> Seconds {
        Seconds(Duration::from_secs_f64(s))
    }

    /// Parses `"500ms"`, `"10s"`, `"2m"`, `"1h"`, `"1.5"` (seconds).
    pub fn parse(text: &str) -> Result<Seconds, String> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: f64 = num
            .parse()
            .map_err(|_| format!("`{text}` is not a duration (e.g. \"10s\")"))?;
        let secs = match unit.trim() {
            "ms" => n / 1000.0,
            "" | "s" => n,
            "m" | "min" => n * 60.0,
            "h" => n * 3600.0,
            "d" => n * 86400.0,
            _ => {
                return Err(format!(
                    "`{text}` has an unknown time unit (use ms, s, m, h, d)"
                ))
            }
        };
        if !(0.0..=1e9).contains(&secs) {
            return Err(format!("`{text}` is out of range"));
        }
        Ok(Seconds::from_secs(secs))
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Seconds;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration such as \"10s\" or a number of seconds")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
                self.visit_f64(v as f64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Seconds, E> {
                if v.is_finite() && (0.0..=1e9).contains(&v) {
                    Ok(Seconds::from_secs(v))
                } else {
                    Err(E::custom("a duration must be between 0 and 1e9 seconds"))
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Seconds, E> {
                Seconds::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!(ByteSize::parse("100"), Ok(ByteSize(100)));
        assert_eq!(ByteSize::parse("0"), Ok(ByteSize(0)));
        assert_eq!(ByteSize::parse("7B"), Ok(ByteSize(7)));
        assert_eq!(ByteSize::parse("512k"), Ok(ByteSize(512 << 10)));
        assert_eq!(ByteSize::parse("32KiB"), Ok(ByteSize(32 << 10)));
        assert_eq!(ByteSize::parse("256MiB"), Ok(ByteSize(256 << 20)));
        assert_eq!(ByteSize::parse("64mb"), Ok(ByteSize(64 << 20)));
        assert_eq!(ByteSize::parse(" 1 GB "), Ok(ByteSize(1 << 30)));
        assert_eq!(ByteSize::parse("2TiB"), Ok(ByteSize(2 << 40)));
        assert!(ByteSize::parse("12 parsecs")
            .unwrap_err()
            .contains("unknown size unit"));
        assert!(ByteSize::parse("").is_err());
        assert!(ByteSize::parse("MiB").is_err());
        assert!(ByteSize::parse("1.5GiB").is_err());
        assert!(ByteSize::parse("-1").is_err());
        assert!(ByteSize::parse("99999999999TiB")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn seconds() {
        let s = |text| Seconds::parse(text).map(|s| s.0);
        assert_eq!(s("10"), Ok(Duration::from_secs(10)));
        assert_eq!(s("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(s("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(s("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(s("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(s("2 min"), Ok(Duration::from_secs(120)));
        assert_eq!(s("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(s("0s"), Ok(Duration::ZERO));
        assert!(s("5 fortnights").unwrap_err().contains("unknown time unit"));
        assert!(s("").is_err());
        assert!(s("-1s").is_err());
        assert!(s("1.2.3s").is_err());
        assert!(s("1e12").is_err());
    }

    #[derive(Debug, serde::Deserialize)]
    struct Both {
        size: ByteSize,
        time: Seconds,
    }

    #[test]
    fn deserialize_numbers_and_strings() {
        let b: Both = toml::from_str("size = 1024\ntime = 30").unwrap();
        assert_eq!(
            (b.size, b.time.0),
            (ByteSize(1024), Duration::from_secs(30))
        );
        let b: Both = toml::from_str("size = \"4KiB\"\ntime = 0.25").unwrap();
        assert_eq!(
            (b.size, b.time.0),
            (ByteSize(4096), Duration::from_millis(250))
        );
        let b: Both = toml::from_str("size = \"1MiB\"\ntime = \"250ms\"").unwrap();
        assert_eq!(
            (b.size, b.time.0),
            (ByteSize(1 << 20), Duration::from_millis(250))
        );
        assert!(toml::from_str::<Both>("size = -1\ntime = 1").is_err());
        assert!(toml::from_str::<Both>("size = 1\ntime = -1").is_err());
        assert!(toml::from_str::<Both>("size = true\ntime = 1").is_err());
    }
}
