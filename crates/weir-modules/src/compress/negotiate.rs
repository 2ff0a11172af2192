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
    for value in values {
        let Ok(text) = value.to_str() else { continue };
        for item in text.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            if coding.is_empty() {
                continue;
            }
            let Some(q) = weight(parts) else { continue };
            let slot = match coding.to_ascii_lowercase().as_str() {
                "gzip" | "x-gzip" => &mut w.gzip,
                "br" => &mut w.br,
                "zstd" => &mut w.zstd,
                "identity" => &mut w.identity,
                "*" => &mut w.any,
                _ => continue,
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
fn weight<'a>(params: impl Iterator<Item = &'a str>) -> Option<u16> {
    let mut q = 1000;
    for p in params {
        let Some((name, value)) = p.split_once('=') else {
            continue;
        };
        if !name.trim().eq_ignore_ascii_case("q") {
            continue;
        }
        let v: f32 = value.trim().parse().ok()?;
        if !(0.0..=1.0).contains(&v) {
            return None;
        }
        q = (v * 1000.0).round() as u16;
    }
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
