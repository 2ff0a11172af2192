//! The form a request field takes in a Vary secondary key (RFC 9111 §4.1): two
//! requests select the same stored variant when their fields differ only in what the
//! field's grammar says carries no meaning.
//!
//! - `Accept-Encoding`: content codings are case-insensitive tokens and the weight
//!   alone says which is preferred (RFC 9110 §12.5.3), so members are lower-cased,
//!   stripped of white space, given their weight in its shortest form (`q=1` is the
//!   default and dropped), and sorted; a member listed twice counts once.
//! - `Accept-Language`: language ranges are case-insensitive (RFC 4647 §2), but
//!   recipients read the order of members of equal weight as the client's preference
//!   (RFC 9110 §12.5.4), so members are normalised the same way and only ordered by
//!   weight, highest first, keeping the client's order among equal weights (`en, fr`
//!   and `fr, en` stay apart; `en;q=0.5, fr` and `fr, en;q=0.5` meet). When a weight
//!   does not parse, the order is left as it is.
//! - Any other field: white space around commas, and several field lines are
//!   combined into one list. Nothing else, since case or order may mean something.
//!
//! A field that is absent only matches a request where it is absent too: it is
//! written as a byte no field value can hold.

use std::borrow::Cow;

use http::{header, HeaderMap, HeaderName};

/// What an absent field is in a key (field values cannot hold control characters).
const ABSENT: char = '\u{1}';

/// The weight a member has without `q` (1, in thousandths).
const DEFAULT_WEIGHT: u16 = 1000;

/// Appends the key form of the request's `name` field (all its lines) to `out`.
pub(crate) fn push_field(out: &mut String, name: &HeaderName, request: &HeaderMap) {
    let lines = request.get_all(name);
    let mut iter = lines.iter();
    let Some(first) = iter.next() else {
        out.push(ABSENT);
        return;
    };
    let order = if name == header::ACCEPT_ENCODING {
        Order::Free
    } else if name == header::ACCEPT_LANGUAGE {
        Order::ByWeight
    } else {
        for (i, line) in lines.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_trimmed_list(out, &String::from_utf8_lossy(line.as_bytes()));
        }
        return;
    };
    // The common request sends one member already in its key form (`gzip`, `en-us`).
    if iter.next().is_none() && is_plain_token(first.as_bytes()) {
        out.push_str(first.to_str().unwrap_or_default());
        return;
    }
    // One string for the whole field; members borrow from it unless their weight
    // must be rewritten.
    let mut compact = String::new();
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            compact.push(',');
        }
        let line = String::from_utf8_lossy(line.as_bytes());
        compact.extend(
            line.chars()
                .filter(|c| *c != ' ' && *c != '\t')
                .map(|c| c.to_ascii_lowercase()),
        );
    }
    let mut members: Vec<Member<'_>> = compact.split(',').filter_map(Member::parse).collect();
    match order {
        Order::Free => {
            members.sort_by(|a, b| a.text.cmp(&b.text));
            members.dedup_by(|a, b| a.text == b.text);
        }
        Order::ByWeight => {
            if members.iter().all(|m| m.weight.is_some()) {
                // Stable: members of equal weight keep the client's order.
                members.sort_by_key(|m| std::cmp::Reverse(m.weight));
            }
        }
    }
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&m.text);
    }
}

/// Whether the order of a field's members carries meaning.
enum Order {
    /// None: only the weights do.
    Free,
    /// Only among members of equal weight.
    ByWeight,
}

/// One list member in key form, with its weight in thousandths (`None`: unreadable).
struct Member<'a> {
    text: Cow<'a, str>,
    weight: Option<u16>,
}

impl<'a> Member<'a> {
    /// A member already lower-cased and without white space: `gzip;q=0.50` becomes
    /// `gzip;q=0.5`; an empty member is nothing.
    fn parse(compact: &'a str) -> Option<Member<'a>> {
        let mut params = compact.split(';');
        let value = params.next().unwrap_or_default();
        if value.is_empty() {
            return None;
        }
        if value.len() == compact.len() {
            return Some(Member {
                text: Cow::Borrowed(compact),
                weight: Some(DEFAULT_WEIGHT),
            });
        }
        let mut text = String::with_capacity(compact.len());
        text.push_str(value);
        let mut weight = Some(DEFAULT_WEIGHT);
        for param in params.filter(|p| !p.is_empty()) {
            match param.strip_prefix("q=") {
                Some(q) => match parse_weight(q) {
                    Some(w) => {
                        weight = Some(w);
                        if w != DEFAULT_WEIGHT {
                            text.push_str(";q=");
                            push_weight(&mut text, w);
                        }
                    }
                    None => {
                        weight = None;
                        text.push(';');
                        text.push_str(param);
                    }
                },
                None => {
                    text.push(';');
                    text.push_str(param);
                }
            }
        }
        let text = if text == compact {
            Cow::Borrowed(compact)
        } else {
            Cow::Owned(text)
        };
        Some(Member { text, weight })
    }
}

/// A qvalue (RFC 9110 §12.4.2: `0`, `0.5`, `0.125`, `1`, `1.000`) in thousandths.
fn parse_weight(q: &str) -> Option<u16> {
    let (int, frac) = q.split_once('.').unwrap_or((q, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths = 0u16;
    for (i, b) in frac.bytes().enumerate() {
        thousandths += u16::from(b - b'0') * [100, 10, 1][i];
    }
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(DEFAULT_WEIGHT),
        _ => None,
    }
}

/// The shortest text of a weight under 1: `0`, `0.5`, `0.125`.
fn push_weight(out: &mut String, w: u16) {
    if w == 0 {
        out.push('0');
        return;
    }
    let digits = format!("{w:03}");
    out.push_str("0.");
    out.push_str(digits.trim_end_matches('0'));
}

/// One member that is already in key form: token characters, no upper case.
fn is_plain_token(v: &[u8]) -> bool {
    !v.is_empty()
        && v.iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(b))
}

/// Appends `value` with the white space around its commas removed.
fn push_trimmed_list(out: &mut String, value: &str) {
    for (i, part) in value.split(',').enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(part.trim_matches([' ', '\t']));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: HeaderName, lines: &[&str]) -> String {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(name.clone(), l.parse().unwrap());
        }
        let mut out = String::new();
        push_field(&mut out, &name, &h);
        out
    }

    fn encoding(lines: &[&str]) -> String {
        key(header::ACCEPT_ENCODING, lines)
    }

    fn language(lines: &[&str]) -> String {
        key(header::ACCEPT_LANGUAGE, lines)
    }

    #[test]
    fn codings_ignore_case_space_order_default_weight_and_repeats() {
        let canonical = encoding(&["br, gzip"]);
        assert_eq!(canonical, "br,gzip");
        for same in [
            &["gzip,br"][..],
            &["GZIP , Br"],
            &["gzip;q=1, br;Q=1.000"],
            &["gzip", "br"],
            &["gzip, br, gzip"],
            &["gzip,,br,"],
        ] {
            assert_eq!(encoding(same), canonical, "{same:?}");
        }
        assert_eq!(encoding(&["gzip;q=0.50, br"]), "br,gzip;q=0.5");
        assert_eq!(encoding(&["gzip ; q=0.5"]), "gzip;q=0.5");
        assert_ne!(encoding(&["gzip;q=0"]), encoding(&["gzip"]));
        assert_eq!(encoding(&["gzip"]), "gzip");
    }

    #[test]
    fn languages_keep_the_order_of_equal_weights() {
        assert_eq!(language(&["en, fr"]), "en,fr");
        assert_eq!(language(&["fr,en"]), "fr,en");
        assert_eq!(language(&["EN-us , Fr"]), "en-us,fr");
        assert_eq!(language(&["en;q=0.5, fr"]), language(&["fr, en;q=0.5"]));
        assert_eq!(
            language(&["de;q=0.8, en;q=0.9, fr;q=0.8"]),
            "en;q=0.9,de;q=0.8,fr;q=0.8"
        );
        // A weight that does not parse leaves the order alone.
        assert_eq!(language(&["en;q=2, fr"]), "en;q=2,fr");
    }

    #[test]
    fn other_fields_lose_only_space_around_commas() {
        let ua = HeaderName::from_static("x-thing");
        assert_eq!(key(ua.clone(), &["A , b"]), "A,b");
        assert_eq!(key(ua.clone(), &["A", "b"]), "A,b");
        assert_ne!(key(ua.clone(), &["b, A"]), key(ua, &["A, b"]));
    }

    #[test]
    fn absent_differs_from_empty() {
        assert_ne!(encoding(&[]), encoding(&[""]));
        assert_eq!(encoding(&[]), ABSENT.to_string());
    }

    #[test]
    fn weights() {
        assert_eq!(parse_weight("0"), Some(0));
        assert_eq!(parse_weight("0."), Some(0));
        assert_eq!(parse_weight("0.125"), Some(125));
        assert_eq!(parse_weight("0.5"), Some(500));
        assert_eq!(parse_weight("1"), Some(1000));
        assert_eq!(parse_weight("1.000"), Some(1000));
        assert_eq!(parse_weight("1.5"), None);
        assert_eq!(parse_weight("0.1234"), None);
        assert_eq!(parse_weight("x"), None);
        let mut s = String::new();
        push_weight(&mut s, 120);
        assert_eq!(s, "0.12");
    }
}
