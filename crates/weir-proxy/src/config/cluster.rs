//! `[cluster]`: this node's place in a Weir cluster over etcd (docs/operations.md,
//! "A cluster"). Without the section Weir is a single node. Its checks are here too
//! (called from `validate.rs`), as they concern this section alone.

use std::net::SocketAddr;

use serde::Deserialize;

use super::error::Issue;
use super::spans::KeyPath;
use super::units::Seconds;

/// `[cluster]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// etcd's client endpoints, `http://host:port` or `https://host:port`.
    pub etcd: Vec<String>,
    /// This node's name, unique in the cluster.
    pub node: String,
    /// Where this node listens for its peers.
    pub peer_addr: SocketAddr,
    /// A node that has not renewed its lease for this long is out of the cluster, and
    /// knows it. Whole seconds (etcd's leases are), at least 1.
    #[serde(default = "default_lease")]
    pub lease: Seconds,
    /// What a node that does not own a key keeps of it.
    #[serde(default)]
    pub local_copies: LocalCopies,
    /// The longest a purge waits for every live member's acknowledgment; at least the
    /// lease, so that a member that stopped is waited out. Default: the lease plus 2 s.
    #[serde(default)]
    pub purge_ack_wait: Option<Seconds>,
    /// The etcd user to authenticate as, when etcd's authentication is on.
    #[serde(default)]
    pub etcd_user: Option<String>,
    /// A file holding that user's password (its first line), so that the password is
    /// not in the configuration.
    #[serde(default)]
    pub etcd_password_file: Option<std::path::PathBuf>,
    /// The CA certificates (PEM) `https://` endpoints are checked against, instead of
    /// the system's roots.
    #[serde(default)]
    pub etcd_ca_file: Option<std::path::PathBuf>,
}

/// `local_copies`: what a node keeps of the keys it does not own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LocalCopies {
    /// Nothing: every request for it goes to the owner.
    None,
    /// What is requested often: a copy is kept from the second fetch through the
    /// owner within the span of the last 100 000 such fetches.
    Hot,
    /// Everything it fetched.
    #[default]
    All,
}

fn default_lease() -> Seconds {
    Seconds::from_secs(3.0)
}

impl ClusterConfig {
    /// How `https://` endpoints are trusted: `etcd_ca_file`'s certificates, else the
    /// system's roots; `None` when every endpoint is plain HTTP.
    pub fn etcd_tls(&self) -> Result<Option<std::sync::Arc<rustls::ClientConfig>>, String> {
        if !self.etcd.iter().any(|e| e.starts_with("https://")) {
            return Ok(None);
        }
        let mut roots = rustls::RootCertStore::empty();
        match &self.etcd_ca_file {
            Some(path) => {
                for cert in super::origin::load_ca_file(path)? {
                    roots.add(cert).map_err(|e| e.to_string())?;
                }
            }
            None => {
                let native = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(native.certs);
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Some(std::sync::Arc::new(config)))
    }

    /// The etcd credentials, the password read from its file.
    pub fn credentials(&self) -> Result<Option<weir_cluster::etcd::Credentials>, String> {
        let (Some(user), Some(file)) = (&self.etcd_user, &self.etcd_password_file) else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
        let password = text.lines().next().unwrap_or("").to_string();
        if password.is_empty() {
            return Err(format!("`{}` holds no password", file.display()));
        }
        Ok(Some(weir_cluster::etcd::Credentials {
            user: user.clone(),
            password,
        }))
    }

    /// The acknowledgment wait in force.
    pub fn ack_wait(&self) -> std::time::Duration {
        self.purge_ack_wait
            .map(|s| s.0)
            .unwrap_or(self.lease.0 + std::time::Duration::from_secs(2))
    }
}

/// The semantic problems of `[cluster]`.
pub(crate) fn check(cluster: &ClusterConfig, issues: &mut Vec<Issue>) {
    let at = KeyPath::top("cluster");
    let mut report = |keys: Vec<KeyPath>, message: String| issues.push(Issue { keys, message });
    if cluster.etcd.is_empty() {
        report(
            vec![at.clone().key("etcd")],
            "at least one etcd endpoint is needed, e.g. [\"http://127.0.0.1:2379\"]".into(),
        );
    }
    for (i, endpoint) in cluster.etcd.iter().enumerate() {
        if let Err(e) = weir_cluster::etcd::parse_endpoint(endpoint) {
            report(vec![at.clone().key("etcd").index(i)], e);
        }
    }
    let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if cluster.node.is_empty() || cluster.node.len() > 64 || !cluster.node.chars().all(name_ok) {
        report(
            vec![at.clone().key("node")],
            format!(
                "`{}` is not a node name: 1 to 64 letters, digits, `-`, `_` or `.`",
                cluster.node
            ),
        );
    }
    let lease = cluster.lease.0;
    if lease.as_secs() < 1 || lease.subsec_nanos() != 0 {
        report(
            vec![at.clone().key("lease")],
            "must be a whole number of seconds, at least 1 (etcd's leases are)".into(),
        );
    }
    match (&cluster.etcd_user, &cluster.etcd_password_file) {
        (Some(_), None) => report(
            vec![at.clone().key("etcd_user")],
            "needs `etcd_password_file`, the file holding the user's password".into(),
        ),
        (None, Some(_)) => report(
            vec![at.clone().key("etcd_password_file")],
            "needs `etcd_user`, the user whose password it holds".into(),
        ),
        (Some(_), Some(_)) => {
            if let Err(e) = cluster.credentials() {
                report(vec![at.clone().key("etcd_password_file")], e);
            }
        }
        (None, None) => {}
    }
    if let Some(path) = &cluster.etcd_ca_file {
        if let Err(e) = super::origin::load_ca_file(path) {
            report(vec![at.clone().key("etcd_ca_file")], e);
        }
    }
    if cluster.purge_ack_wait.is_some() && cluster.ack_wait() < lease {
        report(
            vec![at.clone().key("purge_ack_wait"), at.clone().key("lease")],
            "must be at least the lease: a member that stopped is waited out by its lease".into(),
        );
    }
}
