//! Destination domains, and the map that finds the rules naming a host's domains with
//! one lookup per label of the host rather than one comparison per domain of every
//! rule. The map's answer is the one each rule's own list gives (tests below): a rule
//! that names the host must never be missed, or its deny would be skipped.

use std::collections::HashMap;

use super::bits;

/// A destination domain: `example.com` names that host only; `.example.com` names it
/// and every host below it (Squid's `dstdomain`). Kept lowercase, without the dot.
#[derive(Debug)]
pub(crate) enum Domain {
    Exact(Box<str>),
    Suffix(Box<str>),
}

#[cfg(test)]
impl Domain {
    /// The definition the map must agree with (the walk uses only the map):
    /// compared without one trailing dot of the host, ASCII letters in either case.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host);
        match self {
            Domain::Exact(name) => host.eq_ignore_ascii_case(name),
            Domain::Suffix(name) => {
                if host.len() == name.len() {
                    return host.eq_ignore_ascii_case(name);
                }
                host.len() > name.len()
                    && host.as_bytes()[host.len() - name.len() - 1] == b'.'
                    && host[host.len() - name.len()..].eq_ignore_ascii_case(name)
            }
        }
    }
}

/// Per domain named by any rule: the rules naming it exactly, and the rules naming it
/// with its subdomains, a bit per rule.
#[derive(Debug, Default)]
pub(crate) struct DomainMap {
    words: usize,
    names: HashMap<Box<str>, Named, foldhash::fast::RandomState>,
}

/// The rules naming one domain: (exactly, with its subdomains).
type Named = (Box<[u64]>, Box<[u64]>);

impl DomainMap {
    /// A map for `rules` rules, filled with [`DomainMap::add`].
    pub fn new(rules: usize) -> DomainMap {
        DomainMap {
            words: bits::words(rules),
            names: HashMap::default(),
        }
    }

    /// Rule `rule` names `domain`.
    pub fn add(&mut self, rule: usize, domain: &Domain) {
        let words = self.words;
        let (name, suffix) = match domain {
            Domain::Exact(name) => (name, false),
            Domain::Suffix(name) => (name, true),
        };
        let entry = self
            .names
            .entry(name.to_ascii_lowercase().into())
            .or_insert_with(|| (bits::zeros(words), bits::zeros(words)));
        bits::set(if suffix { &mut entry.1 } else { &mut entry.0 }, rule);
    }

    /// Sets in `out` the bit of every rule with a domain that matches `host`: the
    /// whole host (without one trailing dot, lowercased) is looked up for both kinds,
    /// then what follows each of its dots for the domains with subdomains, which is
    /// where [`Domain::matches`] can find a suffix.
    pub fn matching(&self, host: &str, out: &mut [u64]) {
        if self.names.is_empty() {
            return;
        }
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        if let Some((exact, suffix)) = self.names.get(host.as_str()) {
            bits::or(out, exact);
            bits::or(out, suffix);
        }
        for (i, _) in host.match_indices('.') {
            if let Some((_, suffix)) = self.names.get(&host[i + 1..]) {
                bits::or(out, suffix);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(text: &str) -> Domain {
        match text.strip_prefix('.') {
            Some(rest) => Domain::Suffix(rest.to_ascii_lowercase().into()),
            None => Domain::Exact(text.to_ascii_lowercase().into()),
        }
    }

    /// Every host against every domain, one rule each and all in one map: the map
    /// sets a rule's bit exactly when its domain matches.
    #[test]
    fn the_map_finds_the_rules_each_domain_would() {
        let domains = [
            "a.test",
            ".a.test",
            ".test",
            "test",
            ".b.a.test",
            "x.y",
            ".Ads.Example",
            "ads.example.",
            "..a.test",
            ".a..test",
            ".1",
            "127.0.0.1",
            ".0.0.1",
            "onion",
            ".onion",
            "b-c_d.test",
        ];
        let hosts = [
            "",
            ".",
            "a.test",
            "A.TEST",
            "a.test.",
            "a.test..",
            "b.a.test",
            "c.b.a.test",
            "xa.test",
            "a.testx",
            "test",
            ".test",
            "x.y",
            "w.x.y",
            "ads.example",
            "x.ADS.example",
            "ads.example.",
            "ads.example..",
            ".a.test",
            "..a.test",
            "x..a.test",
            "x.a..test",
            "a..test",
            "127.0.0.1",
            "10.0.0.1",
            "0.0.1",
            "abc.onion",
            "onion",
            "b-c_d.test",
            "é.a.test",
            "[::1]",
        ];
        let mut map = DomainMap::new(domains.len() + 70);
        let list: Vec<Domain> = domains.iter().map(|d| domain(d)).collect();
        // Some rules past the first word of bits, and a rule naming two domains.
        let rule_of = |i: usize| if i.is_multiple_of(2) { i } else { i + 64 };
        for (i, d) in list.iter().enumerate() {
            map.add(rule_of(i), d);
        }
        map.add(rule_of(0), &domain(".onion"));
        for host in hosts {
            let mut out = bits::zeros(map.words);
            map.matching(host, &mut out);
            for (i, d) in list.iter().enumerate() {
                let expected = d.matches(host) || (i == 0 && domain(".onion").matches(host));
                assert_eq!(
                    bits::get(&out, rule_of(i)),
                    expected,
                    "host {host:?}, domain {:?}",
                    domains[i]
                );
            }
            let listed: usize = out.iter().map(|w| w.count_ones() as usize).sum();
            let expected = (0..list.len())
                .filter(|&i| list[i].matches(host) || (i == 0 && domain(".onion").matches(host)))
                .count();
            assert_eq!(listed, expected, "no other bit is set for {host:?}");
        }
    }
}
