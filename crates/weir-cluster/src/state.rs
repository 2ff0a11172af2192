//! What a node knows of the cluster: the members and their acknowledged revisions,
//! its own applied revision, its lease, what it published, and the purge
//! acknowledgment latencies. Plain data under one lock; the tasks in `node.rs` fill it.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// The last latencies kept for the percentiles.
const LATENCIES: usize = 1024;
/// The last publications whose revision is remembered for their waiters.
const PUBLISHED: usize = 4096;

/// One member, as its membership key says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Where it listens for its peers.
    pub peer_addr: String,
}

/// The node's view.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub members: BTreeMap<String, Member>,
    /// Each member's acknowledged revision (its ack key).
    pub acks: BTreeMap<String, i64>,
    /// Every invalidation up to this revision has been applied here.
    pub applied: i64,
    /// The revision the members and acknowledgments were loaded at: the watch's
    /// older changes of them are already reflected.
    pub seen: i64,
    /// The watch has delivered (and this node applied) every change up to this.
    pub delivered: i64,
    /// The lease this node's keys are bound to (0: none, out of the cluster).
    pub lease: i64,
    /// When the request that last renewed (or granted) the lease was sent.
    pub renewed: Option<Instant>,
    /// The revision of this node's own membership key.
    pub registered: i64,
    /// The watch is running.
    pub watching: bool,
    /// Publications: (sequence number, revision, or the error).
    pub published: VecDeque<(u64, Result<i64, String>)>,
    /// Purge acknowledgment latencies, most recent last.
    pub latencies: VecDeque<Duration>,
    /// Purges acknowledged by every live member, and those that were not in time.
    pub acked: u64,
    pub unacked: u64,
    /// Times this node found itself out of touch (its lease lost or late).
    pub out_of_touch_times: u64,
    /// The node is leaving (shutting down): it does not join again.
    pub leaving: bool,
    /// The store's revision at the last etcd answer (for the lag).
    pub etcd_revision: i64,
}

impl State {
    pub fn publication(&mut self, seq: u64, result: Result<i64, String>) {
        if self.published.len() == PUBLISHED {
            self.published.pop_front();
        }
        self.published.push_back((seq, result));
    }

    /// The result of publication `seq`, once known.
    pub fn published(&self, seq: u64) -> Option<Result<i64, String>> {
        let (first, _) = self.published.front()?;
        if seq < *first {
            return Some(Err("forgotten".into()));
        }
        self.published
            .iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, r)| r.clone())
    }

    pub fn latency(&mut self, d: Duration) {
        if self.latencies.len() == LATENCIES {
            self.latencies.pop_front();
        }
        self.latencies.push_back(d);
    }

    /// The `q` quantile (0..1) of the kept latencies.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let mut v: Vec<Duration> = self.latencies.iter().copied().collect();
        if v.is_empty() {
            return None;
        }
        v.sort();
        let at = ((v.len() as f64 - 1.0) * q).round() as usize;
        Some(v[at.min(v.len() - 1)])
    }

    /// Members whose acknowledgment is below `revision`.
    pub fn missing(&self, revision: i64) -> Vec<String> {
        self.members
            .keys()
            .filter(|m| self.acks.get(*m).copied().unwrap_or(0) < revision)
            .cloned()
            .collect()
    }
}
