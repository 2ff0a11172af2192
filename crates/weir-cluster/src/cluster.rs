//! [`Cluster`]: a running node's handle. It starts the node's tasks, takes the
//! invalidations made here for the log, waits for their acknowledgment, names the
//! owner of a key, says whether the node is in touch, and reports the cluster's state.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::shared::{ApplyFn, Settings, Shared};
use crate::state::Member;

thread_local! {
    /// Set while an invalidation from the log is applied: it is not published again.
    static APPLYING: Cell<bool> = const { Cell::new(false) };
}

/// A purge acknowledged by every live member.
#[derive(Debug, Clone)]
pub struct Acknowledged {
    /// The invalidation's revision in etcd.
    pub revision: i64,
    /// The members that acknowledged it.
    pub members: usize,
    /// How long the acknowledgment took.
    pub latency: Duration,
}

/// A purge that was not acknowledged in time.
#[derive(Debug, Clone)]
pub struct NotAcknowledged {
    /// Why, for the client.
    pub reason: String,
}

/// A running node.
pub struct Cluster {
    shared: Arc<Shared>,
    queue: mpsc::UnboundedSender<(u64, Vec<u8>)>,
    /// Invalidations queued so far.
    queued: AtomicU64,
}

impl Cluster {
    /// Starts the node's tasks on the current tokio runtime; `apply` is called, on
    /// that runtime, with every invalidation from the log.
    pub fn start(settings: Settings, apply: ApplyFn) -> Result<Arc<Cluster>, String> {
        let shared = Arc::new(Shared::new(settings, apply)?);
        let (queue, receiver) = mpsc::unbounded_channel();
        tokio::spawn(crate::tasks::session(shared.clone()));
        tokio::spawn(crate::tasks::watch(shared.clone()));
        tokio::spawn(crate::tasks::acknowledge(shared.clone()));
        tokio::spawn(crate::tasks::publish(shared.clone(), receiver));
        Ok(Arc::new(Cluster {
            shared,
            queue,
            queued: AtomicU64::new(0),
        }))
    }

    /// Runs `f` as the application of an invalidation from the log: what it
    /// invalidates is not published again.
    pub fn applying<T>(f: impl FnOnce() -> T) -> T {
        APPLYING.with(|a| a.set(true));
        let out = f();
        APPLYING.with(|a| a.set(false));
        out
    }

    /// Queues an invalidation made on this node for the log (ignored while one from the
    /// log is applied).
    pub fn publish(&self, payload: Vec<u8>) {
        if APPLYING.with(Cell::get) {
            return;
        }
        let seq = self.queued.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = self.queue.send((seq, payload));
    }

    /// Waits until every invalidation published so far is in the log and every live
    /// member has applied it (or lost its lease), at most the acknowledgment wait.
    pub async fn barrier(&self) -> Result<Acknowledged, NotAcknowledged> {
        let start = Instant::now();
        let seq = self.queued.load(Ordering::SeqCst);
        let wait = self.shared.settings.ack_wait;
        let outcome = tokio::time::timeout(wait, self.acknowledged(seq)).await;
        let mut state = self.shared.state();
        match outcome {
            Ok(Ok((revision, members))) => {
                let latency = start.elapsed();
                state.latency(latency);
                state.acked += 1;
                Ok(Acknowledged {
                    revision,
                    members,
                    latency,
                })
            }
            Ok(Err(reason)) => {
                state.unacked += 1;
                Err(NotAcknowledged { reason })
            }
            Err(_) => {
                state.unacked += 1;
                let reason = match state.published(seq) {
                    None | Some(Err(_)) => "etcd did not take the invalidation in time".into(),
                    Some(Ok(r)) => format!(
                        "not acknowledged within {wait:?} by {}",
                        state.missing(r).join(", ")
                    ),
                };
                Err(NotAcknowledged { reason })
            }
        }
    }

    async fn acknowledged(&self, seq: u64) -> Result<(i64, usize), String> {
        let mut changed = self.shared.changed.subscribe();
        loop {
            {
                let state = self.shared.state();
                let revision = match seq {
                    0 => Some(Ok(state.applied)),
                    _ => state.published(seq),
                };
                match revision {
                    Some(Err(e)) => return Err(format!("etcd did not take the invalidation: {e}")),
                    Some(Ok(r)) if state.delivered >= r && state.missing(r).is_empty() => {
                        return Ok((r, state.members.len()));
                    }
                    _ => {}
                }
            }
            if changed.changed().await.is_err() {
                return Err("the cluster stopped".into());
            }
        }
    }

    /// Whether this node may serve stored copies without revalidation: it holds a
    /// lease renewed less than a lease ago and has applied every invalidation up to its
    /// membership.
    pub fn in_touch(&self) -> bool {
        let s = self.shared.state();
        s.lease != 0
            && s.watching
            && s.renewed
                .is_some_and(|r| r.elapsed() < self.shared.settings.lease)
            && s.delivered >= s.registered
    }

    /// Leaves the cluster (on shutdown): revokes the lease, so that its keys go at once
    /// and no purge waits for this node.
    pub async fn leave(&self) {
        let lease = {
            let mut s = self.shared.state();
            s.leaving = true;
            std::mem::take(&mut s.lease)
        };
        if lease != 0 {
            if let Err(e) = self.shared.etcd.revoke(lease).await {
                tracing::warn!(error = %e, "cluster: cannot leave; the lease will expire");
            }
        }
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.shared.settings.node
    }

    /// The owner of `key` among the live members (this node's name when it is alone
    /// or out of touch), and its peer address.
    pub fn owner(&self, key: &str) -> Option<(String, Member)> {
        let s = self.shared.state();
        let name = crate::ring::owner(s.members.keys().map(String::as_str), key)?;
        Some((name.to_string(), s.members.get(name)?.clone()))
    }

    /// The cluster's state as `/admin/cluster` shows it.
    pub fn status(&self) -> Value {
        let in_touch = self.in_touch();
        let s = self.shared.state();
        let names: Vec<&str> = s.members.keys().map(String::as_str).collect();
        let members: Vec<Value> = crate::ring::shares(&names)
            .into_iter()
            .map(|(name, share)| {
                let acked = s.acks.get(name).copied().unwrap_or(0);
                json!({
                    "node": name,
                    "peer_addr": s.members[name].peer_addr,
                    "share": share,
                    "applied_revision": acked,
                    "lag": (s.etcd_revision - acked).max(0),
                })
            })
            .collect();
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
        json!({
            "node": self.shared.settings.node,
            "in_touch": in_touch,
            "lease_id": s.lease,
            "applied_revision": s.applied,
            "etcd_revision": s.etcd_revision,
            "members": members,
            "purges_acknowledged": s.acked,
            "purges_not_acknowledged": s.unacked,
            "purge_ack_ms_p50": ms(s.quantile(0.5)),
            "purge_ack_ms_p99": ms(s.quantile(0.99)),
            "out_of_touch_times": s.out_of_touch_times,
        })
    }

    /// Figures for metrics: (members, applied revision, lag, acknowledged,
    /// not acknowledged, in touch).
    pub fn figures(&self) -> Figures {
        let in_touch = self.in_touch();
        let s = self.shared.state();
        Figures {
            members: s.members.len() as u64,
            applied: s.applied,
            lag: (s.etcd_revision - s.applied).max(0),
            acked: s.acked,
            unacked: s.unacked,
            in_touch,
            ack_p50: s.quantile(0.5),
            ack_p99: s.quantile(0.99),
        }
    }
}

/// The cluster's figures for metrics.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Live members.
    pub members: u64,
    /// This node's applied revision.
    pub applied: i64,
    /// How far behind etcd's revision it is.
    pub lag: i64,
    /// Purges acknowledged by every live member.
    pub acked: u64,
    /// Purges that were not in time.
    pub unacked: u64,
    /// Whether the node is in touch.
    pub in_touch: bool,
    /// Purge acknowledgment latency, median and 99th percentile.
    pub ack_p50: Option<Duration>,
    /// See `ack_p50`.
    pub ack_p99: Option<Duration>,
}
