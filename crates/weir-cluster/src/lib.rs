//! Weir's cluster: several Weir nodes acting as one cache, over etcd v3.
//!
//! Each node holds a lease and a membership key bound to it, and watches the others;
//! cache keys have owners by rendezvous hashing over the live members ([`ring`]).
//! Invalidations made at any node go into one log key in etcd, whose revisions order
//! them; every node applies them from its watch and writes the revision it has applied
//! into its acknowledgment key, so that the node that took a purge can answer it only
//! once every live member has applied it or lost its lease ([`Cluster::barrier`]). A
//! node whose lease is late knows it may have missed invalidations
//! ([`Cluster::in_touch`]). This crate knows nothing of HTTP caching: invalidations
//! are opaque bytes, applied by the function the engine gives it.
#![deny(missing_docs)]

mod cluster;
pub mod etcd;
mod gateway;
pub mod ring;
mod shared;
mod state;
mod tasks;

pub use cluster::{Acknowledged, Cluster, Figures, NotAcknowledged};
pub use shared::{Applied, ApplyFn, Settings};
pub use state::Member;
