//! The label values of Weir's metrics: plain enums that the code being measured names
//! when it records. They sit below the metrics themselves so that such code (the TLS
//! listener, the access log) can name a label without needing the registry.

/// How a transaction was served, for metrics, the access log and `Cache-Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Served fresh from the memory tier.
    Hit,
    /// Served fresh from the disk tier.
    DiskHit,
    /// Fetched from the origin (stored or not).
    Miss,
    /// A stale entry was validated with the origin, which answered 304.
    RefreshUnmodified,
    /// A stale entry was validated with the origin, which sent a new response.
    RefreshModified,
    /// The request could not use the cache (method, Range, no-store ...).
    Bypass,
    /// Served from another client's concurrent fetch of the same object.
    Collapsed,
    /// Served from a stale copy while it is refreshed in the background
    /// (stale-while-revalidate).
    StaleRevalidating,
    /// Served from a stale copy because the origin failed (stale-if-error).
    StaleOnError,
    /// A CONNECT tunnel.
    Tunnel,
    /// Refused (access control, limits, malformed request).
    Denied,
    /// Failed (origin unreachable, timeout, cut body).
    Error,
}

impl CacheOutcome {
    /// All outcomes, in a fixed order (index = `self as usize`).
    pub const ALL: [CacheOutcome; 12] = [
        CacheOutcome::Hit,
        CacheOutcome::DiskHit,
        CacheOutcome::Miss,
        CacheOutcome::RefreshUnmodified,
        CacheOutcome::RefreshModified,
        CacheOutcome::Bypass,
        CacheOutcome::Collapsed,
        CacheOutcome::StaleRevalidating,
        CacheOutcome::StaleOnError,
        CacheOutcome::Tunnel,
        CacheOutcome::Denied,
        CacheOutcome::Error,
    ];

    /// Whether the response body came from the cache rather than the origin: fresh
    /// hits, copies the origin confirmed (304) and stale copies. A collapsed request is
    /// not: its body came from the origin, for another client too.
    pub fn from_cache(self) -> bool {
        matches!(
            self,
            CacheOutcome::Hit
                | CacheOutcome::DiskHit
                | CacheOutcome::RefreshUnmodified
                | CacheOutcome::StaleRevalidating
                | CacheOutcome::StaleOnError
        )
    }

    /// The coarser outcome the module API reports (`weir_api::Outcome`): whatever
    /// spared the origin a body for this client is a hit.
    pub fn for_modules(self) -> weir_api::Outcome {
        use weir_api::Outcome;
        match self {
            CacheOutcome::Hit
            | CacheOutcome::DiskHit
            | CacheOutcome::RefreshUnmodified
            | CacheOutcome::StaleRevalidating
            | CacheOutcome::StaleOnError
            | CacheOutcome::Collapsed => Outcome::Hit,
            CacheOutcome::Miss | CacheOutcome::RefreshModified => Outcome::Miss,
            CacheOutcome::Bypass => Outcome::Bypass,
            CacheOutcome::Tunnel => Outcome::Tunnel,
            CacheOutcome::Denied => Outcome::Denied,
            CacheOutcome::Error => Outcome::Error,
        }
    }

    /// Lowercase label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheOutcome::Hit => "hit",
            CacheOutcome::DiskHit => "disk_hit",
            CacheOutcome::Miss => "miss",
            CacheOutcome::RefreshUnmodified => "refresh_unmodified",
            CacheOutcome::RefreshModified => "refresh_modified",
            CacheOutcome::Bypass => "bypass",
            CacheOutcome::Collapsed => "collapsed",
            CacheOutcome::StaleRevalidating => "stale_revalidating",
            CacheOutcome::StaleOnError => "stale_on_error",
            CacheOutcome::Tunnel => "tunnel",
            CacheOutcome::Denied => "denied",
            CacheOutcome::Error => "error",
        }
    }
}

/// Kinds of errors counted in `weir_errors_total{kind}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Malformed request or ambiguous framing (400).
    BadRequest,
    /// Request header section over the limit (431).
    HeaderTooLarge,
    /// Client not allowed, or CONNECT port not allowed (403).
    Forbidden,
    /// Request body over the limit (413).
    BodyTooLarge,
    /// Could not connect to the origin (502).
    OriginUnreachable,
    /// The origin did not answer in time (504).
    OriginTimeout,
    /// The origin answered with something unusable, reset the stream, or cut its body.
    OriginProtocol,
    /// The TLS handshake with the origin failed (502).
    OriginTls,
    /// The client went away mid-response.
    ClientAborted,
    /// The client paused longer than `[timeouts] client_body_idle` while sending its
    /// request body (408).
    ClientTimeout,
    /// A module that is not optional failed (500).
    ModuleFailed,
    /// A request came back to the proxy that sent it (508).
    ForwardingLoop,
}

impl ErrorKind {
    /// All kinds, in a fixed order (index = `self as usize`).
    pub const ALL: [ErrorKind; 12] = [
        ErrorKind::BadRequest,
        ErrorKind::HeaderTooLarge,
        ErrorKind::Forbidden,
        ErrorKind::BodyTooLarge,
        ErrorKind::OriginUnreachable,
        ErrorKind::OriginTimeout,
        ErrorKind::OriginProtocol,
        ErrorKind::OriginTls,
        ErrorKind::ClientAborted,
        ErrorKind::ClientTimeout,
        ErrorKind::ModuleFailed,
        ErrorKind::ForwardingLoop,
    ];

    /// Lowercase label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::HeaderTooLarge => "header_too_large",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::BodyTooLarge => "body_too_large",
            ErrorKind::OriginUnreachable => "origin_unreachable",
            ErrorKind::OriginTimeout => "origin_timeout",
            ErrorKind::OriginProtocol => "origin_protocol",
            ErrorKind::OriginTls => "origin_tls",
            ErrorKind::ClientAborted => "client_aborted",
            ErrorKind::ClientTimeout => "client_timeout",
            ErrorKind::ModuleFailed => "module_failed",
            ErrorKind::ForwardingLoop => "forwarding_loop",
        }
    }
}

/// Why a connection was closed before HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The TLS handshake failed (bad ClientHello, no common cipher, client gave up).
    TlsHandshake,
    /// The TLS handshake did not finish within `timeouts.client_handshake`.
    TlsTimeout,
    /// A `proxy_protocol` listener got no valid PROXY header.
    ProxyHeader,
    /// The PROXY header did not arrive within `timeouts.client_handshake`.
    ProxyTimeout,
}

impl Refusal {
    /// Every reason, in a fixed order (index = `self as usize`).
    pub const ALL: [Refusal; 4] = [
        Refusal::TlsHandshake,
        Refusal::TlsTimeout,
        Refusal::ProxyHeader,
        Refusal::ProxyTimeout,
    ];

    /// Lowercase label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::TlsHandshake => "tls_handshake",
            Refusal::TlsTimeout => "tls_timeout",
            Refusal::ProxyHeader => "proxy_header",
            Refusal::ProxyTimeout => "proxy_timeout",
        }
    }
}

/// The application protocol a TLS handshake settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// HTTP/2.
    H2,
    /// HTTP/1.1.
    Http11,
    /// The client offered no ALPN (HTTP/1.1 is assumed, h2 still detected by its preface).
    None,
}

impl Alpn {
    pub(super) const ALL: [Alpn; 3] = [Alpn::H2, Alpn::Http11, Alpn::None];

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Alpn::H2 => "h2",
            Alpn::Http11 => "http/1.1",
            Alpn::None => "none",
        }
    }
}
