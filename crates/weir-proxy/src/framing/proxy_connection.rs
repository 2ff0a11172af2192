//! HTTP/1.0 clients behind a proxy ask to keep their connection with
//! `Proxy-Connection: keep-alive` (Netscape's habit, still sent by browsers of that age
//! and by benchmark clients such as Web Polygraph). Squid honours it; hyper keeps an
//! HTTP/1.0 connection only for `Connection: keep-alive` and closes it after every
//! response otherwise. The framing guard sees each request head before hyper parses
//! it, so it renames the field in place: `Proxy-Connection:` becomes `Connection:`
//! followed by six spaces of leading whitespace, the same length, which any parser
//! skips. Both fields are hop-by-hop, so nothing else sees the difference.
//!
//! Only an HTTP/1.0 request whose `Proxy-Connection` says `keep-alive` and that has no
//! `Connection` field of its own is rewritten, and only when the field arrived in the
//! read that completed the head (one read carries a whole head in practice; otherwise
//! the connection closes after the response, as before).

const FROM: &[u8] = b"proxy-connection:";
const TO: &[u8; 17] = b"Connection:      ";

/// The name of the field to rewrite in `req`, a slice of the head the guard parsed.
pub(super) fn field_to_rewrite<'h>(req: &httparse::Request<'_, 'h>) -> Option<&'h str> {
    if req.version != Some(0) {
        return None;
    }
    let mut found = None;
    for f in req.headers.iter() {
        if f.name.eq_ignore_ascii_case("connection") {
            return None;
        }
        if f.name.eq_ignore_ascii_case("proxy-connection") && found.is_none() {
            let keep = f
                .value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"keep-alive"));
            if keep {
                found = Some(f.name);
            }
        }
    }
    found
}

/// Rewrites the field that starts `line` (`Proxy-Connection:` with no space before the
/// colon, as RFC 9112 requires) into a `Connection` field of the same length.
pub(super) fn rewrite(line: &mut [u8]) {
    if line.len() >= FROM.len() && line[..FROM.len()].eq_ignore_ascii_case(FROM) {
        line[..TO.len()].copy_from_slice(TO);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(head: &[u8]) -> Option<String> {
        let mut fields = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut fields);
        req.parse(head).unwrap();
        field_to_rewrite(&req).map(str::to_owned)
    }

    #[test]
    fn only_http10_keep_alive_without_connection() {
        let pc = b"GET http://a/ HTTP/1.0\r\nProxy-Connection: Keep-Alive\r\n\r\n";
        assert_eq!(parse(pc).as_deref(), Some("Proxy-Connection"));
        let v11 = b"GET http://a/ HTTP/1.1\r\nProxy-Connection: keep-alive\r\n\r\n";
        assert_eq!(parse(v11), None);
        let both =
            b"GET http://a/ HTTP/1.0\r\nProxy-Connection: keep-alive\r\nConnection: close\r\n\r\n";
        assert_eq!(parse(both), None);
        let close = b"GET http://a/ HTTP/1.0\r\nProxy-Connection: close\r\n\r\n";
        assert_eq!(parse(close), None);
    }

    #[test]
    fn the_rewrite_keeps_the_length() {
        let mut line = b"Proxy-Connection: keep-alive\r\n".to_vec();
        rewrite(&mut line);
        assert_eq!(&line[..], b"Connection:       keep-alive\r\n");
        let mut other = b"Proxy-Authorization: x\r\n".to_vec();
        rewrite(&mut other);
        assert_eq!(&other[..], b"Proxy-Authorization: x\r\n");
    }
}
