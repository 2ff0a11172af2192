//! Certificates made at test time (rcgen), written as PEM files.

use std::path::{Path, PathBuf};

/// A self-signed certificate and its key, as files.
pub struct TestCert {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestCert {
    /// `{ cert = "…", key = "…" }` for a listener's `tls.certs`.
    pub fn toml(&self) -> String {
        format!(
            "{{ cert = {:?}, key = {:?} }}",
            self.cert.display().to_string(),
            self.key.display().to_string()
        )
    }
}

/// Makes a self-signed certificate for `names` (DNS names, wildcards, or IP
/// addresses) and writes `{stem}.pem` and `{stem}.key` into `dir`. A client trusts it
/// by passing the `.pem` as its CA.
pub fn make_cert(dir: &Path, stem: &str, names: &[&str]) -> TestCert {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let made = rcgen::generate_simple_self_signed(names).expect("generate a certificate");
    let cert = dir.join(format!("{stem}.pem"));
    let key = dir.join(format!("{stem}.key"));
    std::fs::write(&cert, made.cert.pem()).expect("write the certificate");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("write the key");
    TestCert { cert, key }
}

/// `tls = { certs = [ … ] }` for these certificates, the first being the default.
pub fn tls_line(certs: &[&TestCert]) -> String {
    let list: Vec<String> = certs.iter().map(|c| c.toml()).collect();
    format!("tls = {{ certs = [{}] }}", list.join(", "))
}
