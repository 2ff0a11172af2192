//! `[cache]`: the memory and disk tiers, stale-content defaults, tags and PURGE.

use ipnet::IpNet;
use serde::Deserialize;

use super::access;
use super::refresh::RefreshRule;
use super::units::{ByteSize, Seconds};
use super::values::{default_allow, networks};

/// `[cache]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Size of the memory tier, bodies and metadata counted.
    pub memory: ByteSize,
    /// Larger objects pass through uncached.
    pub max_object: ByteSize,
    /// Heuristic freshness: this fraction of the time since Last-Modified.
    pub heuristic_fraction: f32,
    /// The longest heuristic lifetime (Squid's default `refresh_pattern` max: 3 days).
    pub heuristic_max: Seconds,
    /// Heuristic freshness by URL, the first matching rule wins.
    pub refresh: Vec<RefreshRule>,
    /// Concurrent misses for one URL share one origin fetch (collapsed forwarding).
    /// Default: true.
    pub collapse: bool,
    /// Never store a response that sets a cookie, unless a qualified `private` or
    /// `no-cache` keeps `Set-Cookie` out of the stored copy. Default: true, as
    /// Varnish and nginx do (RFC 9111 §7.3 would let the origin decide, and
    /// origins that forget `private` would hand one client's session to others).
    pub refuse_set_cookie: bool,
    /// A targeted cache-control field of this cache's own (RFC 9213), obeyed before
    /// `CDN-Cache-Control` by listeners that obey targeted fields.
    #[serde(deserialize_with = "access::optional_header_name")]
    pub targeted_field: Option<http::HeaderName>,
    /// With a disk tier, larger objects are kept on disk only.
    pub max_memory_object: ByteSize,
    /// The disk tier.
    pub disk: DiskConfig,
    /// Bytes that fills in flight may hold in memory at once (`None`: the default,
    /// see [`CacheConfig::fill_memory_bytes`]).
    pub fill_memory: Option<ByteSize>,
    /// Serve a stale copy this long past its freshness while refreshing it in the
    /// background, for responses without their own `stale-while-revalidate`.
    pub stale_while_revalidate: Seconds,
    /// Serve a stale copy this long past its freshness when the origin fails, for
    /// responses without their own `stale-if-error`.
    pub stale_if_error: Seconds,
    /// Response headers whose values become the stored object's invalidation tags.
    #[serde(deserialize_with = "access::header_names")]
    pub tag_headers: Vec<http::HeaderName>,
    /// Client networks that may send PURGE to a client listener; others get 403.
    #[serde(deserialize_with = "networks")]
    pub purge_from: Vec<IpNet>,
    /// What a range miss fills the cache with besides the origin's 206.
    pub range_fill: RangeFill,
}

/// `[cache] range_fill`: what a range miss puts in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RangeFill {
    /// The 206 as a part, and the whole object fetched in the background (when it is
    /// storable and within `max_object`), so any later range is a hit.
    Whole,
    /// The 206 as a part only (Squid's default): no second request to the origin;
    /// later ranges inside the parts are hits, and parts that cover the object make it.
    Parts,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            memory: ByteSize(256 << 20),
            max_object: ByteSize(64 << 20),
            heuristic_fraction: 0.1,
            heuristic_max: Seconds::from_secs(3.0 * 86400.0),
            refresh: Vec::new(),
            collapse: true,
            refuse_set_cookie: true,
            targeted_field: None,
            max_memory_object: ByteSize(1 << 20),
            disk: DiskConfig::On {
                path: "weir-cache".into(),
                size: ByteSize(1 << 30),
            },
            fill_memory: None,
            stale_while_revalidate: Seconds::from_secs(0.0),
            stale_if_error: Seconds::from_secs(0.0),
            tag_headers: access::default_tag_headers(),
            purge_from: default_allow(),
            range_fill: RangeFill::Whole,
        }
    }
}

impl CacheConfig {
    /// The largest body kept in memory: `max_memory_object` with a disk tier (larger
    /// ones go to disk), `max_object` without one.
    pub fn memory_object_limit(&self) -> u64 {
        match self.disk {
            DiskConfig::Off => self.max_object.0,
            DiskConfig::On { .. } => self.max_memory_object.0,
        }
    }

    /// `fill_memory`, or by default 32 MiB or the largest body kept in memory,
    /// whichever is larger (so that every object the memory tier takes can be filled).
    pub fn fill_memory_bytes(&self) -> u64 {
        self.fill_memory
            .map_or_else(|| (32 << 20).max(self.memory_object_limit()), |b| b.0)
    }
}

/// `[cache] disk`: `"off"`, or `{ path = "…", size = "…" }`.
#[derive(Debug, Clone, PartialEq)]
pub enum DiskConfig {
    /// No disk tier: the cache lives in memory only.
    Off,
    /// A disk tier in `path` (relative to the working directory), at most `size`.
    On {
        /// The directory.
        path: std::path::PathBuf,
        /// Total size of the stored files at most.
        size: ByteSize,
    },
}

impl<'de> Deserialize<'de> for DiskConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            path: std::path::PathBuf,
            size: ByteSize,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Word(String),
            Table(Table),
        }
        match Either::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected \"off\" or a table such as { path = \"weir-cache\", size = \"1GiB\" }",
            )
        })? {
            Either::Word(w) if w == "off" => Ok(DiskConfig::Off),
            Either::Word(w) => Err(serde::de::Error::custom(format!(
                "`{w}`: expected \"off\" or a table such as {{ path = \"weir-cache\", size = \"1GiB\" }}"
            ))),
            Either::Table(t) => Ok(DiskConfig::On {
                path: t.path,
                size: t.size,
            }),
        }
    }
}
