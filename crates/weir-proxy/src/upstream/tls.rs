//! The TLS client configurations of origins, one per ALPN offer (the handshake is in
//! `connect.rs`).
//!
//! Certificates are verified against the system's roots (`rustls-native-certs`, read
//! once) or against an origin's own `ca_file`; `tls_verify = false` accepts any
//! certificate but still checks that the server holds its key.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// The protocols a TLS handshake offers (ALPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Alpn {
    Http1,
    Http2,
    /// `h2` first, then `http/1.1`: the origin chooses.
    Both,
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

    pub(super) fn get(&self, alpn: Alpn) -> Arc<ClientConfig> {
        match alpn {
            Alpn::Http1 => self.http1.clone(),
            Alpn::Http2 => self.http2.clone(),
            Alpn::Both => self.both.clone(),
        }
    }
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
