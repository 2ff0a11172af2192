//! Transparent interception: the destination a client meant before the kernel
//! (iptables `REDIRECT`, nftables `redirect`) sent its connection to Weir.
//!
//! Netfilter's connection tracking keeps the original destination and Linux hands
//! it out through `getsockopt(SO_ORIGINAL_DST)` (IPv4) and
//! `getsockopt(IP6T_SO_ORIGINAL_DST)` (IPv6). `nix` wraps both as safe socket
//! options, so Weir needs no `unsafe` here. Where such a request goes (its Host, else
//! this destination) is the transaction's to decide: `target.rs`.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use nix::sys::socket::{getsockopt, sockopt};
use tokio::net::TcpStream;

/// The destination the client connected to before it was redirected; `None` when
/// the connection was not redirected (it came to Weir's own address, or connection
/// tracking has no entry for it).
pub(crate) fn original_destination(stream: &TcpStream) -> Option<SocketAddr> {
    let local = stream.local_addr().ok()?;
    let original = match local {
        SocketAddr::V4(_) => getsockopt(stream, sockopt::OriginalDst).ok().map(|a| {
            SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            ))
        }),
        SocketAddr::V6(_) => getsockopt(stream, sockopt::Ip6tOriginalDst).ok().map(|a| {
            SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                0,
                a.sin6_scope_id,
            ))
        }),
    }?;
    // Without a redirect, connection tracking reports the address the client really
    // reached: Weir itself, which is no origin.
    (original != local).then_some(original)
}
