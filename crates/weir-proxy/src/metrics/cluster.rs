//! The cluster's figures (`[cluster]`), written at scrape time from the node's own
//! state; nothing at all on a single node.

use std::fmt::Write;
use std::sync::{Arc, Mutex};

use weir_cluster::Figures;

use super::encode::lock;

type Source = Arc<dyn Fn() -> Figures + Send + Sync>;

/// Where the figures come from; set when the node starts.
pub(super) type ClusterSource = Mutex<Option<Source>>;

/// Appends the cluster's series to `out`, when there is a cluster.
pub(super) fn encode(source: &ClusterSource, out: &mut String) {
    let Some(source) = lock(source).clone() else {
        return;
    };
    let f = source();
    let secs = |d: Option<std::time::Duration>| d.map_or(0.0, |d| d.as_secs_f64());
    let gauges: [(&str, &str, f64); 5] = [
        ("weir_cluster_members", "Live members of the cluster, as this node sees them", f.members as f64),
        ("weir_cluster_in_touch", "1 while this node holds its lease and has applied every invalidation; 0 while it validates everything it serves", if f.in_touch { 1.0 } else { 0.0 }),
        ("weir_cluster_applied_revision", "The etcd revision up to which this node has applied every invalidation", f.applied as f64),
        ("weir_cluster_lag_revisions", "How many etcd revisions this node's applied revision is behind the latest it has seen", f.lag as f64),
        ("weir_cluster_purge_ack_p99_seconds", "99th percentile of the time a purge took to be acknowledged by every live member (last 1024 purges taken here)", secs(f.ack_p99)),
    ];
    for (name, help, value) in gauges {
        let _ = write!(
            out,
            "# HELP {name} {help}.\n# TYPE {name} gauge\n{name} {value}\n"
        );
    }
    let _ = write!(
        out,
        "# HELP weir_cluster_purge_ack_p50_seconds Median time a purge took to be acknowledged by every live member.\n# TYPE weir_cluster_purge_ack_p50_seconds gauge\nweir_cluster_purge_ack_p50_seconds {}\n",
        secs(f.ack_p50)
    );
    for (outcome, value) in [("acknowledged", f.acked), ("not_acknowledged", f.unacked)] {
        let _ = write!(
            out,
            "# HELP weir_cluster_purges_{outcome} Purges taken here that were {} by every live member in time.\n# TYPE weir_cluster_purges_{outcome} counter\nweir_cluster_purges_{outcome}_total {value}\n",
            outcome.replace('_', " ")
        );
    }
}
