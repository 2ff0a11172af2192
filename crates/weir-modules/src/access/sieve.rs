//! A rule's cheap conditions in a form the hit path checks in a few instructions:
//! methods and schemes as bit masks, networks as masked 128-bit numbers. Built once
//! from the rule's lists; the outcome is the lists' (tests below).

use std::net::IpAddr;

use ipnet::IpNet;
use weir_api::http::Method;

/// The bit of a method that is none of the standard ones: the rule's list decides.
pub(crate) const EXTENSION: u16 = 1 << 15;

/// A request method's bit.
pub(crate) fn method_bit(method: &Method) -> u16 {
    match method.as_str() {
        "GET" => 1,
        "HEAD" => 1 << 1,
        "POST" => 1 << 2,
        "PUT" => 1 << 3,
        "DELETE" => 1 << 4,
        "CONNECT" => 1 << 5,
        "OPTIONS" => 1 << 6,
        "TRACE" => 1 << 7,
        "PATCH" => 1 << 8,
        _ => EXTENSION,
    }
}

/// A request scheme's bit: `http`, `https` (either case), anything else (CONNECT's
/// empty one), which no rule names.
pub(crate) fn scheme_bit(scheme: &str) -> u8 {
    match scheme.len() {
        4 if scheme.eq_ignore_ascii_case("http") => 1,
        5 if scheme.eq_ignore_ascii_case("https") => 2,
        _ => 4,
    }
}

/// An address as the networks compare it: (is IPv4, its bits).
pub(crate) fn address(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(v4) => (true, u32::from(v4).into()),
        IpAddr::V6(v6) => (false, v6.into()),
    }
}

/// A network: an address is in it when of its family and equal once masked.
#[derive(Debug, Clone, Copy)]
struct Net {
    v4: bool,
    bits: u128,
    mask: u128,
}

/// The masks of one rule. A zero mask: the rule has no such condition.
#[derive(Debug, Default)]
pub(crate) struct Sieve {
    methods: u16,
    schemes: u8,
    nets: Box<[Net]>,
}

impl Sieve {
    /// From the rule's lists (schemes lowercase, networks truncated).
    pub fn new(methods: &[Method], schemes: &[Box<str>], clients: &[IpNet]) -> Sieve {
        let nets = clients
            .iter()
            .map(|net| {
                let (v4, bits) = address(net.network());
                let width = if v4 { 32 } else { 128 };
                let host_bits = width - u32::from(net.prefix_len());
                let all = if v4 { u128::from(u32::MAX) } else { u128::MAX };
                let mask = if host_bits >= width {
                    0
                } else {
                    all & (all << host_bits)
                };
                Net { v4, bits, mask }
            })
            .collect();
        Sieve {
            methods: methods.iter().map(method_bit).fold(0, |a, b| a | b),
            schemes: schemes.iter().map(|s| scheme_bit(s)).fold(0, |a, b| a | b),
            nets,
        }
    }

    /// Whether the method may be one of the rule's: its bit is set, and for a
    /// method that is not standard the rule's list must still be asked.
    #[inline]
    pub fn method(&self, bit: u16) -> MethodTest {
        if self.methods == 0 {
            MethodTest::Yes
        } else if self.methods & bit == 0 {
            MethodTest::No
        } else if bit == EXTENSION {
            MethodTest::AskList
        } else {
            MethodTest::Yes
        }
    }

    #[inline]
    pub fn scheme(&self, bit: u8) -> bool {
        self.schemes == 0 || self.schemes & bit != 0
    }

    /// Whether the client is in one of the rule's networks (or the rule names none).
    #[inline]
    pub fn client(&self, (v4, bits): (bool, u128)) -> bool {
        self.nets.is_empty()
            || self
                .nets
                .iter()
                .any(|n| n.v4 == v4 && bits & n.mask == n.bits)
    }
}

/// What the method mask says.
pub(crate) enum MethodTest {
    Yes,
    No,
    AskList,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_masks_say_what_the_lists_say() {
        let methods: Vec<Method> = ["GET", "PROPFIND"]
            .iter()
            .map(|m| Method::from_bytes(m.as_bytes()).unwrap())
            .collect();
        let nets: Vec<IpNet> = ["10.0.0.0/8", "192.168.1.7/32", "fd00::/8", "0.0.0.0/0"]
            .iter()
            .map(|n| n.parse::<IpNet>().unwrap().trunc())
            .collect();
        let sieve = Sieve::new(&methods, &["https".into()], &nets[..3]);
        for m in ["GET", "HEAD", "POST", "PROPFIND", "MKCOL", "PATCH"] {
            let m = Method::from_bytes(m.as_bytes()).unwrap();
            let said = match sieve.method(method_bit(&m)) {
                MethodTest::Yes => true,
                MethodTest::No => false,
                MethodTest::AskList => methods.contains(&m),
            };
            assert_eq!(said, methods.contains(&m), "{m}");
        }
        assert!(sieve.scheme(scheme_bit("HTTPS")) && !sieve.scheme(scheme_bit("http")));
        assert!(!sieve.scheme(scheme_bit("")));
        for ip in [
            "10.1.2.3",
            "11.0.0.1",
            "192.168.1.7",
            "192.168.1.8",
            "fd12::1",
            "fe80::1",
            "::ffff:10.1.2.3",
            "::a01:203",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            let listed = nets[..3].iter().any(|n| n.contains(&ip));
            assert_eq!(sieve.client(address(ip)), listed, "{ip}");
        }
        // Every address of a family, and none of the other.
        let all_v4 = Sieve::new(&[], &[], &nets[3..]);
        assert!(all_v4.client(address("1.2.3.4".parse().unwrap())));
        assert!(!all_v4.client(address("::1".parse().unwrap())));
        let all_v6 = Sieve::new(&[], &[], &["::/0".parse().unwrap()]);
        assert!(all_v6.client(address("::1".parse().unwrap())));
        assert!(!all_v6.client(address("1.2.3.4".parse().unwrap())));
        assert!(Sieve::default().client(address("1.2.3.4".parse().unwrap())));
    }
}
