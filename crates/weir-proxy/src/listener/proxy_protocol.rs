//! The PROXY protocol (HAProxy's, v1 text and v2 binary) on listeners behind a load
//! balancer: the header that opens each connection says who the client is.
//!
//! Parsing is `ppp`'s; this module bounds what is read (size here, time in the
//! caller), decides which headers are acceptable, and hands back any bytes read past
//! the header so the connection goes on with them.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use ppp::{v1, v2, HeaderResult, PartialResult};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// The v2 signature (12 bytes) every binary header starts with.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// The largest header accepted. A v1 header is at most 107 bytes; a v2 header may
/// carry up to 64 KiB of TLVs, but what load balancers send (addresses, an id, a
/// few TLVs) fits well within this, and a connection that has not yet proved it
/// comes from the balancer should not hold more.
pub(crate) const MAX_HEADER: usize = 4096;

/// Why a connection's header was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeaderError {
    /// Not a PROXY header, or a malformed one.
    Invalid(String),
    /// The peer closed (or failed) before a complete header.
    Closed,
    /// The peer closed without sending a byte: a balancer's TCP health check, not
    /// an error.
    Empty,
}

/// What the header said.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ProxyHeader {
    /// The client's address; `None` when the header carries none to use (v1
    /// `UNKNOWN`, v2 `LOCAL` such as a balancer's health check, v2 UNIX or
    /// unspecified addresses): the peer's own address then stands.
    pub source: Option<SocketAddr>,
    /// The address the client connected to, as the balancer saw it.
    pub destination: Option<SocketAddr>,
    /// Bytes that followed the header in what was read.
    pub rest: Vec<u8>,
}

/// Reads one PROXY header from `io`. The caller bounds the time it may take.
pub(crate) async fn read_header<IO: AsyncRead + Unpin>(
    io: &mut IO,
) -> Result<ProxyHeader, HeaderError> {
    let mut buf = Vec::with_capacity(256);
    loop {
        match parse(&buf) {
            Parsed::Done(header) => return Ok(header),
            Parsed::Invalid(reason) => return Err(HeaderError::Invalid(reason)),
            Parsed::NeedMore => {}
        }
        let start = buf.len();
        // Read in small steps so a header that ends early is not followed by a long
        // wait for a full buffer; whatever comes after it is kept in `rest`.
        buf.resize(start + 512.min(MAX_HEADER + 1 - start), 0);
        let n = io
            .read(&mut buf[start..])
            .await
            .map_err(|_| HeaderError::Closed)?;
        buf.truncate(start + n);
        if n == 0 && start == 0 {
            return Err(HeaderError::Empty);
        }
        if n == 0 {
            return Err(HeaderError::Closed);
        }
    }
}

enum Parsed {
    Done(ProxyHeader),
    NeedMore,
    Invalid(String),
}

fn parse(buf: &[u8]) -> Parsed {
    if buf.is_empty() {
        return Parsed::NeedMore;
    }
    // Decide the version from the first bytes, so garbage is refused as soon as it
    // cannot begin either header, and a v2 header's declared length is checked
    // before waiting for it.
    let v2_prefix = buf.len().min(V2_SIGNATURE.len());
    let is_v2 = buf[..v2_prefix] == V2_SIGNATURE[..v2_prefix];
    let v1_prefix = buf.len().min(6);
    let is_v1 = buf[..v1_prefix] == b"PROXY "[..v1_prefix];
    if !is_v2 && !is_v1 {
        return Parsed::Invalid("the connection does not start with a PROXY header".into());
    }
    if is_v2 && buf.len() >= 16 {
        let declared = 16 + usize::from(u16::from_be_bytes([buf[14], buf[15]]));
        if declared > MAX_HEADER {
            return Parsed::Invalid(format!(
                "a PROXY v2 header of {declared} bytes is longer than {MAX_HEADER}"
            ));
        }
    }
    let result = HeaderResult::parse(buf);
    if result.is_incomplete() {
        return if buf.len() > MAX_HEADER {
            Parsed::Invalid(format!("no complete PROXY header in {MAX_HEADER} bytes"))
        } else {
            Parsed::NeedMore
        };
    }
    let (len, source, destination) = match result {
        HeaderResult::V1(Ok(h)) => {
            let (s, d) = match h.addresses {
                v1::Addresses::Tcp4(a) => (
                    SocketAddr::from((a.source_address, a.source_port)),
                    SocketAddr::from((a.destination_address, a.destination_port)),
                ),
                v1::Addresses::Tcp6(a) => (
                    SocketAddr::from((a.source_address, a.source_port)),
                    SocketAddr::from((a.destination_address, a.destination_port)),
                ),
                v1::Addresses::Unknown => return done(buf, h.header.len(), None, None),
            };
            (h.header.len(), Some(s), Some(d))
        }
        HeaderResult::V2(Ok(h)) => {
            let len = h.header.len();
            if h.command == v2::Command::Local {
                return done(buf, len, None, None);
            }
            match h.addresses {
                v2::Addresses::IPv4(a) => (
                    len,
                    Some(SocketAddr::from((a.source_address, a.source_port))),
                    Some(SocketAddr::from((
                        a.destination_address,
                        a.destination_port,
                    ))),
                ),
                v2::Addresses::IPv6(a) => (
                    len,
                    Some(SocketAddr::from((a.source_address, a.source_port))),
                    Some(SocketAddr::from((
                        a.destination_address,
                        a.destination_port,
                    ))),
                ),
                v2::Addresses::Unix(_) | v2::Addresses::Unspecified => (len, None, None),
            }
        }
        HeaderResult::V1(Err(e)) => return Parsed::Invalid(format!("bad PROXY v1 header: {e}")),
        HeaderResult::V2(Err(e)) => return Parsed::Invalid(format!("bad PROXY v2 header: {e}")),
    };
    done(buf, len, source, destination)
}

fn done(
    buf: &[u8],
    len: usize,
    source: Option<SocketAddr>,
    destination: Option<SocketAddr>,
) -> Parsed {
    Parsed::Done(ProxyHeader {
        source,
        destination,
        rest: buf[len..].to_vec(),
    })
}

/// A stream that first yields bytes already read from it.
pub(crate) struct Prefixed<IO> {
    prefix: Vec<u8>,
    pos: usize,
    io: IO,
}

impl<IO> Prefixed<IO> {
    pub fn new(prefix: Vec<u8>, io: IO) -> Prefixed<IO> {
        Prefixed { prefix, pos: 0, io }
    }

    /// Bytes are waiting in the prefix.
    pub fn has_prefix(&self) -> bool {
        self.pos < self.prefix.len()
    }

    /// The stream after the prefix.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Prefixed<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.pos < this.prefix.len() {
            let n = (this.prefix.len() - this.pos).min(buf.remaining());
            buf.put_slice(&this.prefix[this.pos..this.pos + n]);
            this.pos += n;
            if this.pos == this.prefix.len() {
                this.prefix = Vec::new();
                this.pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Prefixed<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(bytes: &[u8]) -> Result<ProxyHeader, HeaderError> {
        let mut input = bytes;
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(read_header(&mut input))
    }

    fn v2(command: u8, family: u8, addresses: &[u8], tlvs: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.push(0x20 | command);
        h.push(family);
        h.extend_from_slice(&((addresses.len() + tlvs.len()) as u16).to_be_bytes());
        h.extend_from_slice(addresses);
        h.extend_from_slice(tlvs);
        h
    }

    #[test]
    fn v1_tcp4_and_tcp6_give_the_source_and_keep_what_follows() {
        let h =
            header(b"PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\nGET / HTTP/1.1\r\n").unwrap();
        assert_eq!(h.source, Some("203.0.113.7:56324".parse().unwrap()));
        assert_eq!(h.destination, Some("192.0.2.1:443".parse().unwrap()));
        assert_eq!(h.rest, b"GET / HTTP/1.1\r\n");
        let h = header(b"PROXY TCP6 2001:db8::1 2001:db8::2 1000 80\r\n").unwrap();
        assert_eq!(h.source, Some("[2001:db8::1]:1000".parse().unwrap()));
        assert!(h.rest.is_empty());
    }

    #[test]
    fn v1_unknown_keeps_the_peer_address() {
        let h = header(b"PROXY UNKNOWN\r\nrest").unwrap();
        assert_eq!(h.source, None);
        assert_eq!(h.rest, b"rest");
    }

    #[test]
    fn v2_ipv4_ipv6_local_and_tlvs() {
        let mut a = vec![198, 51, 100, 9, 192, 0, 2, 1];
        a.extend_from_slice(&4000u16.to_be_bytes());
        a.extend_from_slice(&443u16.to_be_bytes());
        let mut bytes = v2(1, 0x11, &a, &[0x04, 0, 1, 42]);
        bytes.extend_from_slice(b"\x16\x03\x01");
        let h = header(&bytes).unwrap();
        assert_eq!(h.source, Some("198.51.100.9:4000".parse().unwrap()));
        assert_eq!(h.rest, b"\x16\x03\x01");

        let mut a = Vec::new();
        a.extend_from_slice(
            &"2001:db8::7"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        a.extend_from_slice(
            &"2001:db8::1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        a.extend_from_slice(&[0, 80, 1, 187]);
        let h = header(&v2(1, 0x21, &a, &[])).unwrap();
        assert_eq!(h.source, Some("[2001:db8::7]:80".parse().unwrap()));

        // LOCAL (a balancer's health check): no address to use.
        let h = header(&v2(0, 0x00, &[], &[])).unwrap();
        assert_eq!(h.source, None);
    }

    #[test]
    fn hostile_input_is_refused() {
        for bad in [
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 80\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 80\r\n",
            b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
            b"PROXY TCP4 ::1 ::1 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
            b"proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
        ] {
            assert!(
                matches!(header(bad), Err(HeaderError::Invalid(_))),
                "{:?} was accepted",
                String::from_utf8_lossy(bad)
            );
        }
        // A v1 line that never ends: refused at the v1 limit, not read forever.
        let mut long = b"PROXY TCP4 ".to_vec();
        long.extend(std::iter::repeat_n(b'1', 5000));
        assert!(matches!(header(&long), Err(HeaderError::Invalid(_))));
        // A v2 header declaring more than the limit is refused before it is read.
        let mut big = V2_SIGNATURE.to_vec();
        big.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert!(matches!(header(&big), Err(HeaderError::Invalid(_))));
        // Bad version and command nibbles, and an address block too short for its
        // family.
        let mut bad_version = v2(1, 0x11, &[0; 12], &[]);
        bad_version[12] = 0x31;
        assert!(matches!(header(&bad_version), Err(HeaderError::Invalid(_))));
        let mut bad_command = v2(1, 0x11, &[0; 12], &[]);
        bad_command[12] = 0x2f;
        assert!(matches!(header(&bad_command), Err(HeaderError::Invalid(_))));
        assert!(matches!(
            header(&v2(1, 0x11, &[0; 4], &[])),
            Err(HeaderError::Invalid(_))
        ));
    }

    #[test]
    fn a_header_cut_short_is_closed_not_accepted() {
        assert_eq!(header(b""), Err(HeaderError::Empty));
        assert_eq!(header(b"PROXY TCP4 1.2.3.4"), Err(HeaderError::Closed));
        assert_eq!(header(&V2_SIGNATURE[..7]), Err(HeaderError::Closed));
        let full = v2(1, 0x11, &[1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2], &[]);
        assert_eq!(header(&full[..20]), Err(HeaderError::Closed));
    }

    #[test]
    fn prefixed_yields_the_rest_then_the_stream() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut p = Prefixed::new(b"abc".to_vec(), &b"def"[..]);
            let mut out = String::new();
            p.read_to_string(&mut out).await.unwrap();
            assert_eq!(out, "abcdef");
        });
    }
}
