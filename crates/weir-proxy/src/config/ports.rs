//! `safe_ports`: the ports a forward listener sends plain requests to, as Squid's
//! `Safe_ports` ACL does. Ports such as 22 or 25 speak other protocols, and a proxy
//! that relays HTTP to them lets anyone who can reach it talk to those services.

use std::ops::RangeInclusive;

use serde::Deserialize;

/// One entry: a port (`80`) or an inclusive range (`"1025-65535"`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum PortSpec {
    /// One port.
    Port(i64),
    /// `"LOW-HIGH"`, or one port written as a string.
    Text(String),
}

impl PortSpec {
    /// The ports this entry names; the error says why it names none.
    pub fn range(&self) -> Result<RangeInclusive<u16>, String> {
        let port = |n: i64| {
            u16::try_from(n)
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("port {n} is not between 1 and 65535"))
        };
        match self {
            PortSpec::Port(n) => port(*n).map(|p| p..=p),
            PortSpec::Text(text) => {
                let number = |s: &str| {
                    s.trim()
                        .parse::<i64>()
                        .map_err(|_| {
                            format!("`{text}` is not a port or a range such as \"1025-65535\"")
                        })
                        .and_then(port)
                };
                let (low, high) = match text.split_once('-') {
                    Some((low, high)) => (number(low)?, number(high)?),
                    None => {
                        let p = number(text)?;
                        (p, p)
                    }
                };
                if low > high {
                    return Err(format!("`{text}` is an empty range"));
                }
                Ok(low..=high)
            }
        }
    }
}

/// Squid's default `Safe_ports`: HTTP, HTTPS, FTP, gopher, WAIS, http-mgmt, GSS-HTTP,
/// FileMaker, multiling HTTP and every unprivileged port.
pub(super) fn default_safe_ports() -> Vec<PortSpec> {
    let mut ports: Vec<PortSpec> = [80, 443, 21, 70, 210, 280, 488, 591, 777]
        .into_iter()
        .map(PortSpec::Port)
        .collect();
    ports.push(PortSpec::Text("1025-65535".into()));
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_name_ports_or_ranges() {
        assert_eq!(PortSpec::Port(80).range(), Ok(80..=80));
        assert_eq!(
            PortSpec::Text("1025-65535".into()).range(),
            Ok(1025..=65535)
        );
        assert_eq!(PortSpec::Text("8080".into()).range(), Ok(8080..=8080));
        assert!(PortSpec::Port(0).range().unwrap_err().contains("port 0"));
        assert!(PortSpec::Port(70000).range().is_err());
        assert!(PortSpec::Text("90-80".into())
            .range()
            .unwrap_err()
            .contains("empty"));
        assert!(PortSpec::Text("http".into()).range().is_err());
        let safe: Vec<_> = default_safe_ports()
            .iter()
            .map(|p| p.range().unwrap())
            .collect();
        assert!(safe.iter().any(|r| r.contains(&80)));
        assert!(!safe.iter().any(|r| r.contains(&22) || r.contains(&25)));
    }
}
