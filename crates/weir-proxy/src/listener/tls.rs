//! TLS termination on client listeners (rustls, ring provider): loading certificates,
//! choosing one by SNI, negotiating HTTP/2 or HTTP/1.1 by ALPN, and swapping the
//! certificates on reload while connections stay up.

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::config::{ConfigError, ListenConfig, TlsConfig};
use crate::metrics::Alpn;

/// ALPN protocols offered, in order of preference: a client that offers both gets h2.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// A problem with one certificate of a listener's `tls.certs`.
#[derive(Debug)]
pub(crate) struct CertError {
    /// Index in `certs`; `None` when the list itself is wrong (empty).
    pub index: Option<usize>,
    /// `"cert"` or `"key"`: the file at fault.
    pub field: &'static str,
    /// What is wrong, naming the file.
    pub message: String,
}

/// The TLS settings of one listener, replaced whole by a reload.
pub(crate) struct TlsListener {
    config: ArcSwap<rustls::ServerConfig>,
}

impl TlsListener {
    /// Loads every certificate of `config`.
    pub fn new(config: &TlsConfig) -> Result<TlsListener, CertError> {
        Ok(TlsListener {
            config: ArcSwap::new(server_config(config)?),
        })
    }

    /// Installs new certificates; connections already open keep the ones they
    /// negotiated, new handshakes use these.
    pub fn replace(&self, config: Arc<rustls::ServerConfig>) {
        self.config.store(config);
    }

    /// The acceptor for a new connection.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.load_full())
    }
}

/// Checks every certificate and key of `config` the way a listener loads them, for
/// `weir check`, startup and reload.
pub(crate) fn check(config: &TlsConfig) -> Result<(), CertError> {
    server_config(config).map(|_| ())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls server configuration serving `config`'s certificates.
pub(crate) fn server_config(config: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, CertError> {
    if config.certs.is_empty() {
        return Err(CertError {
            index: None,
            field: "certs",
            message: "at least one certificate is needed".into(),
        });
    }
    let provider = provider();
    let mut certs = Vec::with_capacity(config.certs.len());
    for (i, c) in config.certs.iter().enumerate() {
        let at = |field, message| CertError {
            index: Some(i),
            field,
            message,
        };
        let chain = load_chain(&c.cert).map_err(|m| at("cert", m))?;
        let key = load_key(&c.key).map_err(|m| at("key", m))?;
        let signer = provider.key_provider.load_private_key(key).map_err(|e| {
            at(
                "key",
                format!("`{}`: unusable private key: {e}", c.key.display()),
            )
        })?;
        let certified = CertifiedKey::new(chain, signer);
        if let Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) =
            certified.keys_match()
        {
            return Err(at(
                "key",
                format!(
                    "the key in `{}` does not belong to the certificate in `{}`",
                    c.key.display(),
                    c.cert.display()
                ),
            ));
        }
        certs.push(Arc::new(certified));
    }
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CertError {
            index: None,
            field: "certs",
            message: format!("no TLS version available: {e}"),
        })?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SniResolver { certs }));
    server.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(server))
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))
}

fn load_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read(path)?;
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`{}` is not a PEM certificate file: {e}", path.display()))?;
    let Some(first) = chain.first() else {
        return Err(format!(
            "`{}` holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    };
    webpki::EndEntityCert::try_from(first).map_err(|e| {
        format!(
            "`{}`: the first certificate is not valid X.509: {e}",
            path.display()
        )
    })?;
    Ok(chain)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => format!(
            "`{}` holds no PEM private key (PKCS#8, PKCS#1 or SEC1)",
            path.display()
        ),
        e => format!("`{}` is not a PEM private key file: {e}", path.display()),
    })
}

/// Picks the first certificate valid for the client's SNI name (exact or wildcard SAN
/// names, as a client would check them), else the first certificate.
#[derive(Debug)]
struct SniResolver {
    certs: Vec<Arc<CertifiedKey>>,
}

impl SniResolver {
    fn for_name(&self, name: &str) -> Option<&Arc<CertifiedKey>> {
        let name = ServerName::try_from(name).ok()?;
        // Parsing a certificate is a walk over its DER without allocating: cheap next
        // to the handshake's signature, so nothing is precomputed.
        self.certs.iter().find(|c| {
            c.end_entity_cert()
                .ok()
                .and_then(|der| webpki::EndEntityCert::try_from(der).ok())
                .is_some_and(|ee| ee.verify_is_valid_for_subject_name(&name).is_ok())
        })
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        hello
            .server_name()
            .and_then(|name| self.for_name(name))
            .or(self.certs.first())
            .cloned()
    }
}

/// The protocol ALPN settled on, as a metrics label.
pub(crate) fn alpn_label(conn: &rustls::ServerConnection) -> Alpn {
    match conn.alpn_protocol() {
        Some(b"h2") => Alpn::H2,
        Some(b"http/1.1") => Alpn::Http11,
        _ => Alpn::None,
    }
}

/// New certificates for the TLS listeners a reload finds in `config` (by address),
/// loaded but not installed yet: a reload installs them only once every other part of
/// it has succeeded.
pub(crate) type ReloadPlan = Vec<(Arc<TlsListener>, Arc<rustls::ServerConfig>)>;

/// Loads the certificates of every running TLS listener from the `listen` sections of
/// a configuration read from `source`. A listener that the file no longer gives TLS
/// keeps its certificates (turning TLS on or off takes a restart).
pub(crate) fn reload_plan(
    listen: &[ListenConfig],
    source: &str,
    running: &[(std::net::SocketAddr, Arc<TlsListener>)],
) -> Result<ReloadPlan, ConfigError> {
    let mut plan = Vec::new();
    for (addr, listener) in running {
        let Some((i, tls)) = listen
            .iter()
            .enumerate()
            .find_map(|(i, l)| (l.addr == *addr).then_some((i, l.tls.as_ref()?)))
        else {
            continue;
        };
        let server = server_config(tls).map_err(|e| ConfigError {
            file: source.to_string(),
            line: None,
            key: Some(match e.index {
                Some(j) => format!("listen[{i}].tls.certs[{j}].{}", e.field),
                None => format!("listen[{i}].tls.certs"),
            }),
            message: e.message,
        })?;
        plan.push((listener.clone(), server));
    }
    Ok(plan)
}

/// Installs what [`reload_plan`] loaded; returns a part of the reload summary.
pub(crate) fn apply(plan: ReloadPlan) -> String {
    let n = plan.len();
    for (listener, server) in plan {
        listener.replace(server);
    }
    match n {
        0 => String::new(),
        1 => "reloaded certificates on 1 listener; ".into(),
        n => format!("reloaded certificates on {n} listeners; "),
    }
}
