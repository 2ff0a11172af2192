//! The node's tasks: the session (lease, membership key, renewals), the watch (members,
//! acknowledgments and the invalidation log, applied in revision order), the publisher
//! (invalidations made here, into the log) and the acknowledger (this node's applied
//! revision, into its ack key).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::mpsc;

use crate::etcd::{Event, WatchMessage};
use crate::shared::{Applied, Shared, ACKS, LOG, MEMBERS, PREFIX};
use crate::state::Member;

/// Pause before trying etcd again after a failure.
const RETRY: Duration = Duration::from_millis(200);

/// Holds the lease and the membership key for as long as the node runs: grants,
/// registers, renews every third of the lease, and starts over when the lease is lost.
pub(crate) async fn session(shared: Arc<Shared>) {
    let lease = shared.settings.lease;
    let ttl = lease.as_secs_f64().ceil().max(1.0) as i64;
    loop {
        if shared.state().leaving {
            return;
        }
        let sent = Instant::now();
        let id = match register(&shared, ttl).await {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(error = %e, "cluster: cannot join through etcd");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        shared.state().renewed = Some(sent);
        shared.touch();
        tracing::info!(node = %shared.settings.node, lease = id, "cluster: joined");
        loop {
            tokio::time::sleep(lease / 3).await;
            if shared.state().leaving {
                return;
            }
            let sent = Instant::now();
            match shared.etcd.keep_alive(id).await {
                Ok(true) => {
                    shared.state().renewed = Some(sent);
                }
                Ok(false) => {
                    tracing::warn!("cluster: the lease expired; joining again");
                    break;
                }
                Err(e) => {
                    let late = shared.state().renewed.is_none_or(|r| r.elapsed() >= lease);
                    tracing::warn!(error = %e, "cluster: cannot renew the lease");
                    if late {
                        break;
                    }
                }
            }
        }
        let mut state = shared.state();
        state.lease = 0;
        state.out_of_touch_times += 1;
        drop(state);
        shared.touch();
    }
}

/// Grants a lease and writes this node's ack and membership keys under it.
async fn register(shared: &Shared, ttl: i64) -> Result<i64, crate::etcd::EtcdError> {
    let s = &shared.settings;
    let id = shared.etcd.grant(ttl).await?;
    let applied = shared.state().applied;
    shared
        .etcd
        .put(
            &format!("{ACKS}{}", s.node),
            applied.to_string().as_bytes(),
            id,
        )
        .await?;
    let member = json!({ "peer_addr": s.peer_addr }).to_string();
    let revision = shared
        .etcd
        .put(&format!("{MEMBERS}{}", s.node), member.as_bytes(), id)
        .await?;
    let mut state = shared.state();
    state.lease = id;
    state.registered = revision;
    Ok(id)
}

/// Loads the members and acknowledgments, then watches everything under the prefix
/// from the revision after the applied one, for as long as the node runs.
pub(crate) async fn watch(shared: Arc<Shared>) {
    let mut loaded = false;
    loop {
        if !loaded {
            match load(&shared).await {
                Ok(()) => loaded = true,
                Err(e) => {
                    tracing::warn!(error = %e, "cluster: cannot read the members from etcd");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            }
        }
        let from = {
            let s = shared.state();
            s.applied.max(s.delivered) + 1
        };
        let mut stream = match shared.etcd.watch(PREFIX, from).await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "cluster: cannot watch etcd");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        shared.state().watching = true;
        shared.touch();
        loop {
            match stream.next().await {
                Ok(Some(WatchMessage::Events { revision, events })) => {
                    take(&shared, revision, &events);
                }
                Ok(Some(WatchMessage::Compacted(at))) => {
                    tracing::warn!(at, "cluster: etcd forgot the invalidations since the applied revision; revalidating everything stored");
                    history_lost(&shared);
                    loaded = false;
                    break;
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "cluster: the watch of etcd broke");
                    break;
                }
            }
        }
        shared.state().watching = false;
        shared.touch();
        tokio::time::sleep(RETRY).await;
    }
}

/// Everything stored must be revalidated; the node goes on from etcd's present.
fn history_lost(shared: &Shared) {
    (shared.apply)(Applied::HistoryLost);
    // What is on disk is no use now: the next load starts from etcd's present.
    shared.forget_applied();
    let mut s = shared.state();
    s.applied = 0;
    s.seen = 0;
    s.delivered = 0;
}

/// Reads the members and acknowledgments as of now; starts from the applied revision
/// kept on disk, or from now when there is none (nothing stored, nothing to apply) or
/// it is ahead of this etcd (a new etcd: what happened before is unknown).
async fn load(shared: &Shared) -> Result<(), crate::etcd::EtcdError> {
    let (revision, kvs) = shared.etcd.range_prefix(PREFIX).await?;
    let stored = {
        let s = shared.state();
        if s.applied > 0 {
            Some(s.applied)
        } else {
            shared.stored_applied()
        }
    };
    let applied = match stored {
        Some(a) if a <= revision => a,
        Some(_) => {
            tracing::warn!("cluster: the applied revision on disk is ahead of etcd (a new etcd?); revalidating everything stored");
            (shared.apply)(Applied::HistoryLost);
            revision
        }
        None => revision,
    };
    let mut s = shared.state();
    s.members.clear();
    s.acks.clear();
    for kv in &kvs {
        member_or_ack(&mut s, &kv.key, &kv.value, false);
    }
    s.applied = applied;
    s.seen = revision;
    s.delivered = s.delivered.max(applied);
    s.etcd_revision = revision;
    drop(s);
    shared.store_applied(applied);
    shared.touch();
    Ok(())
}

fn member_or_ack(s: &mut crate::state::State, key: &str, value: &[u8], deleted: bool) {
    if let Some(name) = key.strip_prefix(MEMBERS) {
        let peer = serde_json::from_slice::<serde_json::Value>(value)
            .ok()
            .and_then(|v| v["peer_addr"].as_str().map(str::to_string));
        match (deleted, peer) {
            (false, Some(peer_addr)) => {
                s.members.insert(name.to_string(), Member { peer_addr });
            }
            _ => {
                s.members.remove(name);
            }
        }
    } else if let Some(name) = key.strip_prefix(ACKS) {
        let rev = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
        match (deleted, rev) {
            (false, Some(rev)) => {
                s.acks.insert(name.to_string(), rev);
            }
            _ => {
                s.acks.remove(name);
            }
        }
    }
}

/// Applies one watch message: member and ack changes to the state, invalidations newer
/// than the applied revision to the cache, in order.
fn take(shared: &Shared, revision: i64, events: &[Event]) {
    let mut applied_any = false;
    for event in events {
        let kv = &event.kv;
        if kv.key == LOG {
            let applied = shared.state().applied;
            if !event.deleted && kv.mod_revision > applied {
                (shared.apply)(Applied::Invalidation(&kv.value));
                shared.state().applied = kv.mod_revision;
                applied_any = true;
            }
        } else {
            let mut s = shared.state();
            if kv.mod_revision > s.seen {
                member_or_ack(&mut s, &kv.key, &kv.value, event.deleted);
            }
        }
    }
    let applied = {
        let mut s = shared.state();
        s.delivered = s.delivered.max(revision);
        s.etcd_revision = s.etcd_revision.max(revision);
        s.applied
    };
    if applied_any {
        shared.store_applied(applied);
    }
    shared.touch();
}

/// Writes this node's applied revision into its ack key whenever it grows.
pub(crate) async fn acknowledge(shared: Arc<Shared>) {
    let mut changed = shared.changed.subscribe();
    let mut written = (0i64, 0i64); // (lease, revision)
    loop {
        let (lease, applied) = {
            let s = shared.state();
            (s.lease, s.applied)
        };
        if lease != 0 && (lease, applied) != written && applied > 0 {
            let key = format!("{ACKS}{}", shared.settings.node);
            match shared
                .etcd
                .put(&key, applied.to_string().as_bytes(), lease)
                .await
            {
                Ok(_) => written = (lease, applied),
                Err(e) => {
                    tracing::warn!(error = %e, "cluster: cannot acknowledge");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            }
            continue;
        }
        if changed.changed().await.is_err() {
            return;
        }
    }
}

/// Writes the invalidations made here into the log, in order; each one's revision (or
/// failure) goes into the state for its waiter. A write is retried until the
/// acknowledgment wait is over.
pub(crate) async fn publish(
    shared: Arc<Shared>,
    mut queue: mpsc::UnboundedReceiver<(u64, Vec<u8>)>,
) {
    while let Some((seq, payload)) = queue.recv().await {
        let deadline = Instant::now() + shared.settings.ack_wait;
        let result = loop {
            match shared.etcd.put(LOG, &payload, 0).await {
                Ok(revision) => break Ok(revision),
                Err(e) if Instant::now() >= deadline => break Err(e.to_string()),
                Err(e) => {
                    tracing::warn!(error = %e, "cluster: cannot write an invalidation to etcd");
                    tokio::time::sleep(RETRY).await;
                }
            }
        };
        if let Err(e) = &result {
            tracing::error!(error = %e, "cluster: an invalidation was applied here only");
        }
        shared.state().publication(seq, result);
        shared.touch();
    }
}
