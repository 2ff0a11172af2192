//! Value readers and defaults that several sections share. They sit below every
//! section so that a section never reaches up to the whole configuration for them.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Deserializer};

pub(super) fn default_allow() -> Vec<IpNet> {
    vec![
        "127.0.0.0/8".parse().expect("literal network"),
        "::1/128".parse().expect("literal network"),
    ]
}

/// CIDR networks; a bare IP address is taken as a network of one.
pub(super) fn networks<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
    // Element by element, so that an error carries the span of the bad element.
    struct Network(IpNet);
    impl<'de> Deserialize<'de> for Network {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            string_with(
                d,
                "a network such as \"10.0.0.0/8\" or an address",
                |text| {
                    text.parse::<IpNet>()
                        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                        .map(Network)
                        .map_err(|_| {
                            format!(
                                "`{text}` is not a network such as \"10.0.0.0/8\" or an address"
                            )
                        })
                },
            )
        }
    }
    let networks = Vec::<Network>::deserialize(d)?;
    Ok(networks.into_iter().map(|n| n.0).collect())
}

/// Deserializes a string through `parse`. The error is raised inside the visitor, where
/// `toml` still knows the value's span; raised after deserializing, it would only be
/// given the span of the enclosing table or array.
pub(super) fn string_with<'de, D, T, F>(
    d: D,
    expecting: &'static str,
    parse: F,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    F: FnOnce(&str) -> Result<T, String>,
{
    struct V<F>(&'static str, F);
    impl<T, F: FnOnce(&str) -> Result<T, String>> serde::de::Visitor<'_> for V<F> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(self.0)
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
            (self.1)(v).map_err(E::custom)
        }
    }
    d.deserialize_str(V(expecting, parse))
}
