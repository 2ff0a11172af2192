//! Intermediary header rules (RFC 9110 §7.6): hop-by-hop fields, `Via`, `Max-Forwards`.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Fields that describe one connection, never forwarded (RFC 9110 §7.6.1; `Keep-Alive`,
/// `Proxy-Connection` and `Proxy-Authenticate`/`Proxy-Authorization` by long practice).
/// `Trailer` is not one of them (RFC 9110 §6.6.2): it names the trailer fields, which
/// Weir forwards, and an HTTP/1.1 client is sent only the fields it names.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    KEEP_ALIVE,
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// HTTP/1.0's keep-alive parameters: hop-by-hop, and naming no other field.
pub(crate) const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");

/// Where `TE` is in [`HOP_BY_HOP`].
const TE_BIT: u16 = 1 << 5;

/// The field that marks a request from a cluster peer (the cluster's hop, `hop.rs`);
/// its value names the sending node.
pub(crate) const HOP: HeaderName = HeaderName::from_static("weir-hop");

/// Beside [`HOP`]: the origin a peer's fill is to be fetched from (`http://host:port`
/// or `https://host:port`), while the request's URL is the one it is cached under.
pub(crate) const HOP_ORIGIN: HeaderName = HeaderName::from_static("weir-hop-origin");

/// Our `Via` entry: protocol version and pseudonym.
pub(crate) const VIA_HTTP11: HeaderValue = HeaderValue::from_static("1.1 weir");
pub(crate) const VIA_HTTP2: HeaderValue = HeaderValue::from_static("2 weir");
pub(crate) const VIA_HTTP10: HeaderValue = HeaderValue::from_static("1.0 weir");

/// Removes hop-by-hop fields and every field the `Connection` header names.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none or only `Connection`: one pass over the names (equality
    // of standard names is an integer compare) spares nine hashed lookups per message.
    let mut present = 0u16;
    for name in headers.keys() {
        if let Some(i) = HOP_BY_HOP.iter().position(|h| h == name) {
            present |= 1 << i;
        }
    }
    if present == 0 {
        return;
    }
    // A client that takes trailers (`TE: trailers`, with `Connection: TE` as RFC 9110
    // §10.1.4 asks) gets those the origin sends, so the origin may be told the same;
    // any transfer coding it listed is its own.
    let trailers = present & TE_BIT != 0 && te_takes_trailers(headers);
    // HOP_BY_HOP[0] is Connection.
    if present & 1 != 0 {
        let mut named: Vec<HeaderName> = Vec::new();
        for value in headers.get_all(header::CONNECTION) {
            let Ok(s) = value.to_str() else { continue };
            for token in s.split(',').map(str::trim) {
                // Removed below in any case; naming it costs an allocation.
                if token.eq_ignore_ascii_case("keep-alive") {
                    continue;
                }
                if let Ok(n) = HeaderName::from_bytes(token.as_bytes()) {
                    named.push(n);
                }
            }
        }
        for name in named {
            headers.remove(name);
        }
    }
    for (i, name) in HOP_BY_HOP.iter().enumerate() {
        if present & (1 << i) != 0 {
            headers.remove(name);
        }
    }
    if trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
}

/// Whether a `TE` field lists `trailers`.
fn te_takes_trailers(headers: &HeaderMap) -> bool {
    lists(headers, header::TE, "trailers")
}

/// Whether the list field `name` (RFC 9110 §5.6.1), on any of its lines, has `token`
/// among its members, each compared without its parameters and case.
pub(crate) fn lists(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|member| {
            let bare = member.split(';').next().unwrap_or("");
            bare.trim().eq_ignore_ascii_case(token)
        })
}

/// Appends our `Via` entry for a message received with `version`.
pub(crate) fn append_via(headers: &mut HeaderMap, version: http::Version) {
    headers.append(header::VIA, via(version));
}

/// Our `Via` entry for a message received with `version`.
pub(crate) fn via(version: http::Version) -> HeaderValue {
    match version {
        http::Version::HTTP_2 => VIA_HTTP2,
        http::Version::HTTP_10 | http::Version::HTTP_09 => VIA_HTTP10,
        _ => VIA_HTTP11,
    }
}

/// Whether `name` is a hop-by-hop field by itself (not counting those `Connection`
/// names).
pub(crate) fn is_hop_by_hop(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(name)
}

/// Whether the `Connection` fields of `headers` name no field but the connection's own
/// options (`keep-alive`, `close`, neither of them a field the message carries), so
/// that removing the hop-by-hop fields removes no other.
pub(crate) fn connection_names_no_field(headers: &HeaderMap) -> bool {
    let mut close = false;
    for value in headers.get_all(header::CONNECTION) {
        if value.to_str().is_err() {
            return false;
        }
        for token in value
            .as_bytes()
            .split(|&b| b == b',')
            .map(<[u8]>::trim_ascii)
        {
            close |= token.eq_ignore_ascii_case(b"close");
            if !is_connection_option(token) {
                return false;
            }
        }
    }
    !close || !headers.contains_key("close")
}

/// Whether a `Connection` token is one of the connection's own options (`close`,
/// `keep-alive`) or empty, rather than the name of another field to remove with it.
pub(crate) fn is_connection_option(token: &[u8]) -> bool {
    token.is_empty()
        || token.eq_ignore_ascii_case(b"close")
        || token.eq_ignore_ascii_case(b"keep-alive")
}

/// What `Max-Forwards` asks of a TRACE or OPTIONS request (RFC 9110 §7.6.2).
pub(crate) enum MaxForwards {
    /// No header, or not TRACE/OPTIONS: forward unchanged.
    Absent,
    /// Zero: this proxy must answer itself.
    AnswerHere,
    /// Forward with the value decremented (already done in the headers).
    Decremented,
}

/// Applies `Max-Forwards` for TRACE and OPTIONS.
pub(crate) fn max_forwards(method: &http::Method, headers: &mut HeaderMap) -> MaxForwards {
    if method != http::Method::TRACE && method != http::Method::OPTIONS {
        return MaxForwards::Absent;
    }
    let Some(v) = headers.get(header::MAX_FORWARDS) else {
        return MaxForwards::Absent;
    };
    match v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()) {
        Some(0) => MaxForwards::AnswerHere,
        Some(n) => {
            headers.insert(header::MAX_FORWARDS, HeaderValue::from(n - 1));
            MaxForwards::Decremented
        }
        // An invalid value cannot be decremented; answering here is the safe reading.
        None => MaxForwards::AnswerHere,
    }
}

/// Whether the message framing is ambiguous: both Content-Length and
/// Transfer-Encoding, or Content-Length values that disagree (RFC 9112 §6.3).
pub(crate) fn ambiguous_framing(headers: &HeaderMap) -> bool {
    let mut lengths = headers.get_all(header::CONTENT_LENGTH).iter();
    let Some(first) = lengths.next() else {
        return false;
    };
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return true;
    }
    let parse = |v: &HeaderValue| -> Option<Vec<u64>> {
        v.to_str()
            .ok()?
            .split(',')
            .map(|p| p.trim().parse::<u64>().ok())
            .collect()
    };
    let Some(first) = parse(first) else {
        return true;
    };
    let Some(&n) = first.first() else { return true };
    if first.iter().any(|&m| m != n) {
        return true;
    }
    lengths.any(|v| parse(v).is_none_or(|vals| vals.iter().any(|&m| m != n)))
}

/// The request's declared body length, when it has a valid Content-Length.
pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    let value = headers.get(header::CONTENT_LENGTH)?;
    // The usual form, a few digits, read without the general path's UTF-8 and
    // whitespace handling (read twice on every miss).
    let bytes = value.as_bytes();
    if (1..=18).contains(&bytes.len()) && bytes.iter().all(u8::is_ascii_digit) {
        return Some(bytes.iter().fold(0, |n, &d| n * 10 + u64::from(d - b'0')));
    }
    // Anything else, a list (`5, 5`) among them: its first element.
    value.to_str().ok()?.split(',').next()?.trim().parse().ok()
}

/// The most header fields a request may carry, as Apache's `LimitRequestFields` bounds
/// them: hyper's HTTP/1 parser gets this many slots, and HTTP/2 requests are held to
/// the same number.
pub(crate) const MAX_REQUEST_FIELDS: usize = 256;

/// Why a request head is refused, if it is, and with which status: `fields` header
/// fields, a target of `target` bytes, and `bytes` of target plus fields (as
/// [`header_section_len`] counts them) against `limit`. A target longer than the whole
/// limit gets 414, as nginx and Apache answer a request line too long; any other head
/// over it 431. Every HTTP version, and hyper's own refusals through the framing guard,
/// give these same reasons, so the limit is one whatever the head's shape.
pub(crate) fn head_refusal(
    fields: usize,
    target: usize,
    bytes: usize,
    limit: usize,
) -> Option<(http::StatusCode, String)> {
    use http::StatusCode;
    if fields > MAX_REQUEST_FIELDS {
        Some((
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            too_many_fields(),
        ))
    } else if target > limit {
        Some((StatusCode::URI_TOO_LONG, target_too_long(limit)))
    } else if bytes > limit {
        Some((
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            head_too_large(limit),
        ))
    } else {
        None
    }
}

/// The reason for a request target longer than `limit` bytes.
pub(crate) fn target_too_long(limit: usize) -> String {
    format!("request target is longer than {limit} bytes")
}

/// The reason for a head with more than [`MAX_REQUEST_FIELDS`] fields.
pub(crate) fn too_many_fields() -> String {
    format!("more than {MAX_REQUEST_FIELDS} header fields")
}

/// The reason for a head over the byte limit.
pub(crate) fn head_too_large(limit: usize) -> String {
    format!("request header section is larger than {limit} bytes")
}

/// Where a request's credentials for the proxy are (`Proxy-Authorization` on forward
/// listeners, `Authorization` on reverse ones). When a module takes them
/// ([`weir_api::Module::takes_credentials`]), Weir's HTTP/1.1 parser keeps the field
/// out of the request's map: inserting it there only for the module to remove it
/// again cost an authenticated hit about 300 instructions.
#[derive(Debug, Default)]
pub(crate) enum Credentials {
    /// In the request's fields, if it has any: requests parsed by hyper (HTTP/2, a
    /// body, an upgrade), or with no module that takes them.
    #[default]
    InFields,
    /// Taken out as the head was parsed: the value, or none when it had no such field.
    /// Boxed: a request head moves several times on its way to the transaction, and
    /// a value inline made every request's moves larger, with or without credentials.
    SetAside(Option<Box<HeaderValue>>),
}

/// What the engine checks of every request's fields before anything else, found in
/// one pass over them: each of those lookups (Host once, Content-Length three times)
/// hashed a name and probed the map, and most requests have no body fields at all.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldScan {
    /// `Host` fields.
    pub hosts: usize,
    pub content_length: bool,
    /// The size of the section as received, about: each field's name and value, and
    /// 4 bytes for `: ` and the line's end.
    pub section_len: usize,
    /// Fields the parser set aside (see [`Credentials`]): not in the map, but part of
    /// the head the client sent and of its limits.
    pub set_aside: usize,
    /// A `Via` field: the request may have been here before (`via.rs`).
    pub via: bool,
    /// An `Upgrade` field: the request may ask to switch protocols (`upgrade.rs`).
    pub upgrade: bool,
}

impl FieldScan {
    pub fn of(headers: &HeaderMap) -> FieldScan {
        let mut scan = FieldScan::default();
        for (name, value) in headers {
            scan.section_len += name.as_str().len() + value.len() + 4;
            if name == header::HOST {
                scan.hosts += 1;
            } else if name == header::CONTENT_LENGTH {
                scan.content_length = true;
            } else if name == header::VIA {
                scan.via = true;
            } else if name == header::UPGRADE {
                scan.upgrade = true;
            }
        }
        scan
    }

    /// Counts the field `name` that the parser set aside, when it had one.
    pub fn count_set_aside(&mut self, value: Option<&HeaderValue>, name: Option<&HeaderName>) {
        if let (Some(value), Some(name)) = (value, name) {
            self.set_aside += 1;
            self.section_len += name.as_str().len() + value.len() + 4;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_reads_digits_lists_and_refuses_the_rest() {
        let length = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_LENGTH, HeaderValue::from_static(v));
            content_length(&h)
        };
        assert_eq!(length("0"), Some(0));
        assert_eq!(length("1024"), Some(1024));
        assert_eq!(length("999999999999999999"), Some(999_999_999_999_999_999));
        // Past the short path: the general one, as far as a u64 goes.
        assert_eq!(length("18446744073709551615"), Some(u64::MAX));
        assert_eq!(length("18446744073709551616"), None);
        assert_eq!(length("5, 5"), Some(5));
        assert_eq!(length(" 7 "), Some(7));
        assert_eq!(length(""), None);
        assert_eq!(length("12a"), None);
        assert_eq!(length("-1"), None);
        assert_eq!(content_length(&HeaderMap::new()), None);
    }

    #[test]
    fn one_pass_finds_what_the_lookups_found() {
        let mut h = HeaderMap::new();
        h.append(header::HOST, HeaderValue::from_static("a"));
        h.append(header::HOST, HeaderValue::from_static("b"));
        h.append(header::ACCEPT, HeaderValue::from_static("*/*"));
        h.append(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        let scan = FieldScan::of(&h);
        assert_eq!(scan.hosts, h.get_all(header::HOST).iter().count());
        assert!(scan.content_length);
        // "host: a", "host: b", "accept: */*", "content-length: 3", each + 4.
        assert_eq!(
            scan.section_len,
            (4 + 1 + 4) * 2 + (6 + 3 + 4) + (14 + 1 + 4)
        );
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.remove(header::CONTENT_LENGTH);
        h.remove(header::HOST);
        let scan = FieldScan::of(&h);
        assert_eq!(scan.hosts, 0);
        assert!(!scan.content_length);
        assert_eq!(FieldScan::of(&HeaderMap::new()), FieldScan::default());
    }

    #[test]
    fn removes_connection_named_fields() {
        let mut h = HeaderMap::new();
        h.insert("connection", "close, x-secret".parse().unwrap());
        h.insert("x-secret", "1".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert("x-kept", "1".parse().unwrap());
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-kept"));
    }

    #[test]
    fn removes_every_hop_by_hop_field() {
        let mut h = HeaderMap::new();
        for name in &HOP_BY_HOP[1..] {
            h.append(name, "1".parse().unwrap());
        }
        h.append("connection", "Keep-Alive".parse().unwrap());
        h.append("connection", "upgrade, X-Named".parse().unwrap());
        h.insert("x-named", "1".parse().unwrap());
        h.insert("x-kept", "1".parse().unwrap());
        remove_hop_by_hop(&mut h);
        assert_eq!(h.keys().collect::<Vec<_>>(), ["x-kept"]);
        let mut plain = HeaderMap::new();
        plain.insert("x-kept", "1".parse().unwrap());
        remove_hop_by_hop(&mut plain);
        assert_eq!(plain.len(), 1);
    }

    #[test]
    fn te_trailers_is_kept_alone_and_trailer_is_forwarded() {
        let mut h = HeaderMap::new();
        h.insert("te", "gzip;q=0.5, Trailers".parse().unwrap());
        h.insert("trailer", "x-checksum".parse().unwrap());
        remove_hop_by_hop(&mut h);
        assert_eq!(h.get("te").unwrap(), "trailers");
        assert_eq!(h.get("trailer").unwrap(), "x-checksum");
        let mut h = HeaderMap::new();
        h.insert("te", "gzip, trailersx".parse().unwrap());
        remove_hop_by_hop(&mut h);
        assert!(h.is_empty());
        // `Connection: TE`, as RFC 9110 asks of a sender of TE, does not lose it.
        let mut h = HeaderMap::new();
        h.insert("te", "trailers".parse().unwrap());
        h.insert("connection", "te".parse().unwrap());
        remove_hop_by_hop(&mut h);
        assert_eq!(h.get("te").unwrap(), "trailers");
    }

    #[test]
    fn framing() {
        let mut h = HeaderMap::new();
        h.append("content-length", "5".parse().unwrap());
        assert!(!ambiguous_framing(&h));
        h.append("content-length", "5".parse().unwrap());
        assert!(!ambiguous_framing(&h));
        h.append("content-length", "6".parse().unwrap());
        assert!(ambiguous_framing(&h));
        let mut h = HeaderMap::new();
        h.append("content-length", "5".parse().unwrap());
        h.append("transfer-encoding", "chunked".parse().unwrap());
        assert!(ambiguous_framing(&h));
    }

    #[test]
    fn max_forwards_decrements() {
        let mut h = HeaderMap::new();
        h.insert("max-forwards", "3".parse().unwrap());
        assert!(matches!(
            max_forwards(&http::Method::OPTIONS, &mut h),
            MaxForwards::Decremented
        ));
        assert_eq!(h["max-forwards"], "2");
        h.insert("max-forwards", "0".parse().unwrap());
        assert!(matches!(
            max_forwards(&http::Method::TRACE, &mut h),
            MaxForwards::AnswerHere
        ));
        assert!(matches!(
            max_forwards(&http::Method::GET, &mut h),
            MaxForwards::Absent
        ));
    }
}
