//! Content-coding negotiation: which of the encodings we offer a client's
//! `Accept-Encoding` prefers (RFC 9110, section 12.5.3).

use weir_api::http::{header, HeaderMap};
use weir_api::serde::Deserialize;

/// An encoding the compressor produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(crate = "weir_api::serde")]
pub enum Encoding {
    /// gzip (deflate in a gzip wrapper).
    #[serde(rename = "gzip")]
    Gzip,
    /// Brotli.
    #[serde(rename = "br")]
    Brotli,
    /// Zstandard.
    #[serde(rename = "zstd")]
    Zstd,
}

impl Encoding {
    /// The content-coding token (`Content-Encoding`, `Accept-Encoding`).
    pub fn token(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Brotli => "br",
            Encoding::Zstd => "zstd",
        }
    }

    /// Its part of the cache variant: one stored object per encoding.
    pub fn variant(self) -> &'static str {
        match self {
            Encoding::Gzip => "ae=gzip",
            Encoding::Brotli => "ae=br",
            Encoding::Zstd => "ae=zstd",
        }
    }

    /// The encoding a variant part (without `ae=`) names.
    pub fn from_token(token: &str) -> Option<Encoding> {
        match token {
            "gzip" => Some(Encoding::Gzip),
            "br" => Some(Encoding::Brotli),
            "zstd" => Some(Encoding::Zstd),
            _ => None,
        }
    }
}

/// The weights an `Accept-Encoding` gives, in thousandths (q=0.5 is 500).
#[derive(Debug, Default)]
struct Weights {
    gzip: Option<u16>,
    br: Option<u16>,
    zstd: Option<u16>,
    identity: Option<u16>,
    any: Option<u16>,
}

/// The encoding to produce for a request with these headers, from `offered` (in our
/// order of preference, which breaks ties), or `None` for the identity.
///
/// - no `Accept-Encoding`: identity (the client said nothing, so it gets the bytes
///   as the origin sent them);
/// - a coding not named takes the weight of `*`, if any, else 0;
/// - identity is acceptable unless `identity;q=0`, or `*;q=0` without `identity`;
///   not named, it comes after every coding with a weight; a compressed coding is
///   chosen when its weight is at least identity's;
/// - when nothing is acceptable (`identity;q=0` and no coding we offer), identity is
///   sent anyway: an origin's bytes beat a `406` for a proxy.
pub fn negotiate(headers: &HeaderMap, offered: &[Encoding]) -> Option<Encoding> {
    let mut values = headers.get_all(header::ACCEPT_ENCODING).iter().peekable();
    values.peek()?;
    let mut w = Weights::default();
    // Bytes rather than text, and no copies: this runs on every request, hits
    // included. A coding with bytes outside ASCII matches none of ours.
    for value in values {
        for item in value.as_bytes().split(|&b| b == b',') {
            let mut parts = item.split(|&b| b == b';');
            let coding = parts.next().unwrap_or_default().trim_ascii();
            if coding.is_empty() {
                continue;
            }
            let Some(q) = weight(parts) else { continue };
            let is = |name: &[u8]| coding.eq_ignore_ascii_case(name);
            let slot = if is(b"gzip") || is(b"x-gzip") {
                &mut w.gzip
            } else if is(b"br") {
                &mut w.br
            } else if is(b"zstd") {
                &mut w.zstd
            } else if is(b"identity") {
                &mut w.identity
            } else if coding == b"*" {
                &mut w.any
            } else {
                continue;
            };
            // A coding listed twice: the higher weight.
            *slot = Some(slot.map_or(q, |old| old.max(q)));
        }
    }
    // Identity not named is acceptable, but the least preferred: any coding with a
    // weight beats it.
    let identity = w.identity.or(w.any.filter(|&q| q == 0)).unwrap_or(1);
    let mut best: Option<(Encoding, u16)> = None;
    for &encoding in offered {
        let explicit = match encoding {
            Encoding::Gzip => w.gzip,
            Encoding::Brotli => w.br,
            Encoding::Zstd => w.zstd,
        };
        let q = explicit.or(w.any).unwrap_or(0);
        if q > 0 && best.is_none_or(|(_, b)| q > b) {
            best = Some((encoding, q));
        }
    }
    best.filter(|&(_, q)| q >= identity).map(|(e, _)| e)
}

/// The weight of an item from its parameters: `q=` (default 1), in thousandths;
/// `None` when malformed (the item is ignored).
fn weight<'a>(params: impl Iterator<Item = &'a [u8]>) -> Option<u16> {
    let mut q = 1000;
    for p in params {
        let Some(eq) = p.iter().position(|&b| b == b'=') else {
            continue;
        };
        if !p[..eq].trim_ascii().eq_ignore_ascii_case(b"q") {
            continue;
        }
        q = qvalue(p[eq + 1..].trim_ascii())?;
    }
    Some(q)
}

/// A weight (`0`, `0.5`, `1.000`; a missing leading digit is forgiven) in
/// thousandths, rounded at the fourth decimal; `None` when not a number from 0 to 1.
fn qvalue(v: &[u8]) -> Option<u16> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(dot) => (&v[..dot], &v[dot + 1..]),
        None => (v, &[][..]),
    };
    if int.len() > 1 || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    if !int.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    match int.first() {
        None | Some(b'0') => {}
        Some(b'1') if frac.iter().all(|&d| d == b'0') => return Some(1000),
        Some(_) => return None,
    }
    let digit = |i: usize| frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    let q = digit(0) * 100 + digit(1) * 10 + digit(2) + u16::from(digit(3) >= 5);
    Some(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Encoding::*;

    const ALL: [Encoding; 3] = [Brotli, Zstd, Gzip];

    fn pick(ae: Option<&str>, offered: &[Encoding]) -> Option<Encoding> {
        let mut h = HeaderMap::new();
        if let Some(ae) = ae {
            h.insert(header::ACCEPT_ENCODING, ae.parse().unwrap());
        }
        negotiate(&h, offered)
    }

    #[test]
    fn plain_lists_follow_our_preference() {
        assert_eq!(pick(None, &ALL), None);
        assert_eq!(pick(Some(""), &ALL), None);
        assert_eq!(pick(Some("gzip"), &ALL), Some(Gzip));
        assert_eq!(pick(Some("x-gzip"), &ALL), Some(Gzip));
        assert_eq!(pick(Some("gzip, deflate, br, zstd"), &ALL), Some(Brotli));
        assert_eq!(pick(Some("gzip, zstd"), &ALL), Some(Zstd));
        assert_eq!(pick(Some("gzip, br"), &[Gzip, Brotli]), Some(Gzip));
        assert_eq!(pick(Some("deflate, compress"), &ALL), None);
        assert_eq!(pick(Some("GZIP"), &ALL), Some(Gzip));
    }

    #[test]
    fn q_values_rank_and_exclude() {
        assert_eq!(pick(Some("br;q=0.5, gzip;q=0.8"), &ALL), Some(Gzip));
        assert_eq!(pick(Some("br;q=0, gzip"), &ALL), Some(Gzip));
        assert_eq!(pick(Some("gzip;q=0"), &ALL), None);
        assert_eq!(pick(Some("gzip ; q=0.001"), &ALL), Some(Gzip));
        // Identity preferred to a coding.
        assert_eq!(pick(Some("gzip;q=0.5, identity"), &ALL), None);
        assert_eq!(pick(Some("gzip;q=0.5, identity;q=0.5"), &ALL), Some(Gzip));
        // Malformed weights are ignored items.
        assert_eq!(pick(Some("br;q=2, gzip;q=x, zstd;q=0.3"), &ALL), Some(Zstd));
    }

    #[test]
    fn weights_are_read_exactly() {
        assert_eq!(qvalue(b"0"), Some(0));
        assert_eq!(qvalue(b"1"), Some(1000));
        assert_eq!(qvalue(b"1.000"), Some(1000));
        assert_eq!(qvalue(b"0.5"), Some(500));
        assert_eq!(qvalue(b".25"), Some(250));
        assert_eq!(qvalue(b"0.0005"), Some(1));
        assert_eq!(qvalue(b"0.9996"), Some(1000));
        for bad in [
            &b""[..],
            b".",
            b"1.5",
            b"1.0001",
            b"2",
            b"x",
            b"0.5x",
            b"-0",
            b"10",
        ] {
            assert_eq!(qvalue(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(pick(Some("gzip;Q=0.3, br;q=0.2"), &ALL), Some(Gzip));
        assert_eq!(
            pick(Some("gzip; level=9; q=0.7, br;q=0.6"), &ALL),
            Some(Gzip)
        );
    }

    #[test]
    fn star_and_identity() {
        assert_eq!(pick(Some("*"), &ALL), Some(Brotli));
        assert_eq!(pick(Some("*;q=0.5, br;q=0"), &ALL), Some(Zstd));
        assert_eq!(pick(Some("identity;q=0, gzip"), &ALL), Some(Gzip));
        assert_eq!(pick(Some("identity;q=0"), &ALL), None, "nothing acceptable");
        assert_eq!(pick(Some("*;q=0"), &ALL), None);
        assert_eq!(pick(Some("*;q=0, zstd"), &ALL), Some(Zstd));
        assert_eq!(pick(Some("identity"), &ALL), None);
    }

    #[test]
    fn several_header_lines() {
        let mut h = HeaderMap::new();
        h.append(header::ACCEPT_ENCODING, "identity;q=0.1".parse().unwrap());
        h.append(header::ACCEPT_ENCODING, "zstd;q=0.2".parse().unwrap());
        assert_eq!(negotiate(&h, &ALL), Some(Zstd));
    }
}
