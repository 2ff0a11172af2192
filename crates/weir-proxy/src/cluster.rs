//! The engine's side of a cluster (`[cluster]`, the `weir-cluster` crate): starts the
//! node, turns invalidations into the log's payloads and back, and says when a stored
//! copy must be revalidated before it is served (the node is out of touch, or lost
//! the history of invalidations while it had it).

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde_json::{json, Value};
use weir_cache::{Cache, CachedObject, Invalidation};
use weir_cluster::{Applied, Cluster, Settings};

use crate::config::{Config, DiskConfig, ListenConfig, ListenMode, LocalCopies};

/// URLs the `hot` doorkeeper remembers before it starts over.
const DOORKEEPER: usize = 100_000;

/// The file, in the disk tier's directory, that keeps the applied revision.
const STATE_FILE: &str = "cluster-applied-revision";

/// A running cluster node, as the engine uses it.
pub(crate) struct ClusterLink {
    pub cluster: Arc<Cluster>,
    /// `[cluster] lease`: also the longest a fill waits for the owner's answer.
    pub lease: std::time::Duration,
    /// `[cluster] local_copies`.
    local_copies: LocalCopies,
    /// For `local_copies = "hot"`: the URLs fetched through their owner once lately
    /// (a doorkeeper: the second fetch within its span keeps a copy).
    once: Mutex<HashSet<u64>>,
    /// When this node lost the history of invalidations: what was stored before must
    /// be revalidated.
    lost_at: Arc<Mutex<Option<SystemTime>>>,
}

impl ClusterLink {
    /// Starts this node of the cluster `config` names, applying the log to `cache`.
    pub(crate) fn start(config: &Config, cache: &Arc<Cache>) -> Result<Option<Arc<Self>>, String> {
        let Some(c) = &config.cluster else {
            return Ok(None);
        };
        let state_file = match &config.cache.disk {
            DiskConfig::On { path, .. } => Some(path.join(STATE_FILE)),
            DiskConfig::Off => None,
        };
        let lost_at = Arc::new(Mutex::new(None));
        let weak = Arc::downgrade(cache);
        let lost = lost_at.clone();
        let apply = Box::new(move |what: Applied<'_>| match what {
            Applied::Invalidation(payload) => match (decode(payload), weak.upgrade()) {
                (Some(what), Some(cache)) => {
                    Cluster::applying(|| cache.purge(what));
                }
                (None, _) => {
                    tracing::warn!("cluster: an invalidation in the log is not understood")
                }
                _ => {}
            },
            Applied::HistoryLost => {
                *lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(SystemTime::now());
            }
        });
        let settings = Settings {
            endpoints: c.etcd.clone(),
            node: c.node.clone(),
            peer_addr: c.peer_addr.to_string(),
            lease: c.lease.0,
            ack_wait: c.ack_wait(),
            state_file,
            credentials: c.credentials()?,
            tls: c.etcd_tls()?,
        };
        let cluster = Cluster::start(settings, apply)?;
        Ok(Some(Arc::new(ClusterLink {
            cluster,
            lease: c.lease.0,
            local_copies: c.local_copies,
            once: Mutex::new(HashSet::new()),
            lost_at,
        })))
    }

    /// Puts an invalidation made here into the log.
    pub(crate) fn publish(&self, what: &Invalidation) {
        self.cluster.publish(encode(what));
    }

    /// Whether this node keeps a copy of `url`, which its owner just answered.
    pub(crate) fn keeps_copy(&self, url: &str) -> bool {
        match self.local_copies {
            LocalCopies::All => true,
            LocalCopies::None => false,
            LocalCopies::Hot => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                url.hash(&mut hasher);
                let mut once = self.once.lock().unwrap_or_else(|e| e.into_inner());
                if once.len() >= DOORKEEPER {
                    once.clear();
                }
                !once.insert(hasher.finish())
            }
        }
    }

    /// Whether this node may serve stored copies without revalidation at all.
    pub(crate) fn in_touch(&self) -> bool {
        self.cluster.in_touch()
    }

    /// Whether `object` must be revalidated before it is served, fresh or not.
    pub(crate) fn must_revalidate(&self, object: &CachedObject, now: SystemTime) -> bool {
        if !self.cluster.in_touch() {
            return true;
        }
        let lost_at = *self.lost_at.lock().unwrap_or_else(|e| e.into_inner());
        lost_at.is_some_and(|at| {
            let since = now.duration_since(at).unwrap_or_default();
            object.policy.age(now) >= since
        })
    }
}

/// The listener on `[cluster] peer_addr`: a forward proxy for the other nodes' fills,
/// open to loopback and private networks, without modules (the node that has the
/// client runs them).
pub(crate) fn peer_listener(config: &Config) -> Option<ListenConfig> {
    let c = config.cluster.as_ref()?;
    let mut listener = Config::default().listen.into_iter().next()?;
    listener.addr = c.peer_addr;
    listener.mode = ListenMode::Forward;
    listener.peers = true;
    listener.modules = Some(Vec::new());
    listener.allow = [
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "::1/128",
        "fc00::/7",
    ]
    .iter()
    .filter_map(|n| n.parse().ok())
    .collect();
    Some(listener)
}

/// An invalidation as the log carries it (JSON).
fn encode(what: &Invalidation) -> Vec<u8> {
    let v = match what {
        Invalidation::Url(u) => json!({ "url": u }),
        Invalidation::Prefix(p) => json!({ "prefix": p }),
        Invalidation::Tag(t) => json!({ "tag": t }),
        Invalidation::Groups { origin, names } => json!({ "origin": origin, "groups": names }),
    };
    v.to_string().into_bytes()
}

fn decode(payload: &[u8]) -> Option<Invalidation> {
    let v: Value = serde_json::from_slice(payload).ok()?;
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(u) = text("url") {
        return Some(Invalidation::Url(u));
    }
    if let Some(p) = text("prefix") {
        return Some(Invalidation::Prefix(p));
    }
    if let Some(t) = text("tag") {
        return Some(Invalidation::Tag(t));
    }
    let names = v.get("groups")?.as_array()?;
    Some(Invalidation::Groups {
        origin: text("origin")?,
        names: names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalidations_survive_the_log() {
        for what in [
            Invalidation::Url("http://h/a?b".into()),
            Invalidation::Prefix("http://h/img/".into()),
            Invalidation::Tag("blue".into()),
            Invalidation::Groups {
                origin: "http://h".into(),
                names: vec!["a".into(), "b".into()],
            },
        ] {
            assert_eq!(decode(&encode(&what)), Some(what));
        }
        assert_eq!(decode(b"{}"), None);
    }
}
