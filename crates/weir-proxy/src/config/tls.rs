//! `[[listen]] tls`: the certificates a listener terminates TLS with.

use std::path::PathBuf;

use serde::Deserialize;

/// `tls = { certs = [ { cert = "a.pem", key = "a.key" }, … ] }` on a `[[listen]]`.
///
/// The same table can be written `[[listen.tls.certs]]` sections, one per certificate.
/// Paths are relative to the working directory, as `[cache] disk.path` and
/// `[log] access` are.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificates, each with its key. A client's SNI name selects the first
    /// whose certificate is valid for it (its SAN names, wildcards included); the first
    /// certificate is the default, for clients without SNI or with a name no
    /// certificate covers.
    pub certs: Vec<CertConfig>,
}

/// One certificate chain and its private key, both PEM files.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertConfig {
    /// The certificate, followed by any intermediate certificates (PEM).
    pub cert: PathBuf,
    /// The private key of the first certificate (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}
