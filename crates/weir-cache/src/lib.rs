//! Weir's HTTP cache: what may be stored and for how long (RFC 9111 and RFC 9213, read
//! by its own [`freshness`] rules), cache keys and Vary variants, the storage tiers
//! behind a small trait, and request coalescing.
//!
//! The cache knows nothing about sockets or origins: the engine asks it
//! [`Cache::lookup`], fetches on a miss through a [`Flight`] so that concurrent misses
//! share one origin fetch, and hands complete responses to [`Cache::store`].
#![deny(missing_docs)]

mod adapted;
mod body;
mod budget;
mod cache;
pub mod cache_control;
mod coalesce;
mod compact;
pub mod conditional;
mod damage;
pub mod directives;
mod disk;
mod file_read;
pub mod freshness;
pub mod groups;
mod head_fields;
mod invalidation;
mod key;
mod lock;
mod object;
mod part_set;
mod parts;
mod policy;
mod purge;
mod purge_stats;
mod spill;
mod stale;
mod storage;
mod tags;
pub mod targeted;
mod temp_name;
mod tiered;
mod vary;
mod vary_value;

pub use adapted::{Adapted, OriginFields};
pub use body::{Body, BodyReader, FileBody};
pub use budget::{FillBudget, FillHold};
pub use cache::{Cache, CacheSettings, InvalidationListener, Lookup};
pub use cache_control::directive;
pub use coalesce::{Coalescer, Flight, FlightReader, FlightWriter, Join, Sharing};
pub use compact::with_served_room;
pub use disk::{DiskSettings, DiskStats};
pub use freshness::{Heuristic, PolicyOptions};
pub use head_fields::RequestFields;
pub use invalidation::{Invalidation, Ticket, RETAIN_AT_MOST, RETAIN_FOR};
pub use key::CacheKey;
pub use object::{CachedObject, StoredHead};
pub use part_set::{Part, PartSet};
pub use parts::{content_range, strong_validator, PartStored};
pub use policy::{Freshness, StoragePolicy};
pub use purge_stats::PurgeStats;
pub use spill::{Spill, SpillFile, SPILL_BATCH};
pub use stale::StaleUse;
pub use storage::{MemoryStorage, Storage, StoredItem};
pub use tags::DEFAULT_TAG_HEADERS;
pub use vary::vary_names;
