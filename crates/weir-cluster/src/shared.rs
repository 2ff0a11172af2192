//! What the node's tasks and its handle share: the settings, the etcd client, the
//! state and the signal of its changes, and the callback that applies invalidations.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::etcd::Etcd;
use crate::state::State;

/// Everything under this prefix in etcd is Weir's.
pub(crate) const PREFIX: &str = "/weir/";
/// Membership keys: `/weir/members/<node>`, bound to the node's lease.
pub(crate) const MEMBERS: &str = "/weir/members/";
/// Acknowledgments: `/weir/acks/<node>` = the revision applied, bound to the lease.
pub(crate) const ACKS: &str = "/weir/acks/";
/// The invalidation log: one key, each put of it an invalidation, ordered by revision.
pub(crate) const LOG: &str = "/weir/log";

/// What a node is told to apply.
pub enum Applied<'a> {
    /// An invalidation another node (or this one) published, as it was published.
    Invalidation(&'a [u8]),
    /// History was lost (etcd compacted past this node's applied revision, or is a
    /// new etcd): everything stored here must be revalidated before it is served.
    HistoryLost,
}

/// The function that applies what the log says.
pub type ApplyFn = Box<dyn Fn(Applied<'_>) + Send + Sync>;

/// A node's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// etcd's client endpoints, `http://host:port` or `https://host:port`.
    pub endpoints: Vec<String>,
    /// This node's unique name.
    pub node: String,
    /// Where this node listens for its peers.
    pub peer_addr: String,
    /// The lease: a node that has not renewed it for this long is out.
    pub lease: Duration,
    /// The longest a purge waits for the members' acknowledgments.
    pub ack_wait: Duration,
    /// Where the applied revision is kept across restarts (with the disk tier).
    pub state_file: Option<PathBuf>,
    /// Who to authenticate to etcd as, when its authentication is on.
    pub credentials: Option<crate::etcd::Credentials>,
    /// How `https://` endpoints are trusted.
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

pub(crate) struct Shared {
    pub settings: Settings,
    pub etcd: Etcd,
    state: Mutex<State>,
    /// Bumped on every change of the state that a waiter may care about.
    pub changed: tokio::sync::watch::Sender<u64>,
    pub apply: ApplyFn,
}

impl Shared {
    pub fn new(settings: Settings, apply: ApplyFn) -> Result<Shared, String> {
        // One call waits at most a third of the lease, so that a renewal that hangs
        // still leaves time for another before the lease runs out.
        let timeout = (settings.lease / 3).max(Duration::from_millis(200));
        Ok(Shared {
            etcd: Etcd::new(
                &settings.endpoints,
                timeout,
                settings.credentials.clone(),
                settings.tls.clone(),
            )?,
            settings,
            state: Mutex::new(State::default()),
            changed: tokio::sync::watch::channel(0).0,
            apply,
        })
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes whoever waits on the state.
    pub fn touch(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// The applied revision kept on disk, if any.
    pub fn stored_applied(&self) -> Option<i64> {
        let path = self.settings.state_file.as_ref()?;
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    }

    /// Forgets the applied revision kept on disk.
    pub fn forget_applied(&self) {
        if let Some(path) = &self.settings.state_file {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Keeps `applied` on disk (write then rename: never a torn file).
    pub fn store_applied(&self, applied: i64) {
        let Some(path) = &self.settings.state_file else {
            return;
        };
        let tmp = path.with_extension("tmp");
        let result =
            std::fs::write(&tmp, format!("{applied}\n")).and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = result {
            tracing::warn!(error = %e, path = %path.display(), "cluster: cannot keep the applied revision");
        }
    }
}
