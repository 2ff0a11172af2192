//! Opening a connection to an origin: name resolution, TCP, and for `https://` origins
//! a TLS handshake with rustls that offers the ALPN protocols the caller asks for.
//!
//! Certificates are verified against the system's roots (`rustls-native-certs`, read
//! once) or against an origin's own `ca_file`; `tls_verify = false` accepts any
//! certificate but still checks that the server holds its key.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::{Origin, OriginAddr, UpstreamError};

/// A connected stream, plain or TLS: the connection tasks do not care which.
pub(super) type BoxIo = Box<dyn Io>;

/// What a connection to an origin is.
pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// The protocols a TLS handshake offers (ALPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Alpn {
    Http1,
    Http2,
    /// `h2` first, then `http/1.1`: the origin chooses.
    Both,
}

/// What the handshake agreed on. Clear-text connections and origins that ignore ALPN
/// give `Unspecified`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Negotiated {
    Http1,
    Http2,
    Unspecified,
}

/// The client configurations of one origin, one per ALPN offer.
pub(crate) struct TlsConfigs {
    http1: Arc<ClientConfig>,
    http2: Arc<ClientConfig>,
    both: Arc<ClientConfig>,
}

/// Whom to trust.
pub(crate) enum Trust {
    /// These roots (the system's, or an origin's `ca_file`).
    Roots(RootCertStore),
    /// Anyone (`tls_verify = false`).
    Anyone,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsConfigs {
    pub(crate) fn new(trust: Trust) -> Result<TlsConfigs, String> {
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?;
        let base = match trust {
            Trust::Roots(roots) => builder.with_root_certificates(roots),
            Trust::Anyone => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider))),
        }
        .with_no_client_auth();
        let with = |alpn: &[&[u8]]| {
            let mut c = base.clone();
            c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            Arc::new(c)
        };
        Ok(TlsConfigs {
            http1: with(&[b"http/1.1"]),
            http2: with(&[b"h2"]),
            both: with(&[b"h2", b"http/1.1"]),
        })
    }

    /// Trusting the system's root certificates.
    pub(crate) fn system() -> Result<TlsConfigs, String> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (added, _unusable) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            let why = found
                .errors
                .first()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            return Err(format!(
                "no system root certificates found{why}: install the system's CA \
                 certificates (ca-certificates) or set `ca_file` in the origin's [[origin]]"
            ));
        }
        TlsConfigs::new(Trust::Roots(roots))
    }

    /// Trusting the certificates of a `ca_file` only.
    pub(crate) fn from_ca_file(path: &std::path::Path) -> Result<TlsConfigs, String> {
        let certs = crate::config::load_ca_file(path)?;
        let mut roots = RootCertStore::empty();
        for cert in certs {
            roots.add(cert).map_err(|e| e.to_string())?;
        }
        TlsConfigs::new(Trust::Roots(roots))
    }

    fn get(&self, alpn: Alpn) -> Arc<ClientConfig> {
        match alpn {
            Alpn::Http1 => self.http1.clone(),
            Alpn::Http2 => self.http2.clone(),
            Alpn::Both => self.both.clone(),
        }
    }
}

/// Resolves, connects (trying each address) and, for `https://`, completes the TLS
/// handshake. The caller bounds the time.
pub(super) async fn connect(
    origin: &Origin,
    alpn: Alpn,
) -> Result<(BoxIo, Negotiated), UpstreamError> {
    let tcp = connect_tcp(&origin.addr).await?;
    let Some(tls) = &origin.tls else {
        return Ok((Box::new(tcp), Negotiated::Unspecified));
    };
    let configs = tls.as_ref().map_err(|e| UpstreamError::Tls(e.clone()))?;
    let name = ServerName::try_from(origin.addr.host.as_str())
        .map_err(|e| UpstreamError::Tls(format!("`{}` as a TLS name: {e}", origin.addr.host)))?
        .to_owned();
    let stream = tokio_rustls::TlsConnector::from(configs.get(alpn))
        .connect(name, tcp)
        .await
        .map_err(|e| {
            UpstreamError::Tls(format!("TLS handshake with {} failed: {e}", origin.addr))
        })?;
    let negotiated = match stream.get_ref().1.alpn_protocol() {
        Some(b"h2") => Negotiated::Http2,
        Some(b"http/1.1") => Negotiated::Http1,
        _ => Negotiated::Unspecified,
    };
    Ok((Box::new(stream), negotiated))
}

async fn connect_tcp(origin: &OriginAddr) -> Result<TcpStream, UpstreamError> {
    let addrs = tokio::net::lookup_host((origin.host.as_str(), origin.port))
        .await
        .map_err(|e| UpstreamError::Connect(format!("cannot resolve {}: {e}", origin.host)))?;
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(UpstreamError::Connect(match last {
        Some(e) => format!("cannot connect to {origin}: {e}"),
        None => format!("{} has no address", origin.host),
    }))
}

/// `tls_verify = false`: any certificate is accepted, for tests against origins with
/// throw-away certificates. The handshake signatures are still checked, so the peer
/// must hold the key of the certificate it sent.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
