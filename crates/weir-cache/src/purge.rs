//! Purges: of a URL (all its variants), of every URL under a prefix, of every object
//! carrying a tag or in a group of an origin; and their counts.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::cache::Cache;
use crate::invalidation::Invalidation;
use crate::key::CacheKey;
use crate::lock::lock;
use crate::purge_stats::PurgeStats;
use crate::storage::StoredItem;

impl Cache {
    /// Removes every stored response for the URL of `key`: all Vary variants and
    /// module variants. Fetches that started before cannot store theirs. Returns how
    /// many objects were removed.
    pub fn invalidate(&self, key: &CacheKey) -> usize {
        self.purge(Invalidation::Url(key.url().to_string()))
    }

    /// Removes every object `what` applies to, and keeps fetches in flight from storing
    /// what it applies to. A prefix or a tag walks every stored key. Returns how many
    /// objects were removed.
    pub fn purge(&self, what: Invalidation) -> usize {
        let seq = self.invalidations.record(what.clone(), Instant::now());
        // Before the removals: an index rebuild in progress must not link what this
        // removes (see DiskTier::note).
        if let Some(disk) = &self.disk {
            disk.note(&what);
        }
        if let Some(listener) = self.listener.get() {
            listener(&what);
        }
        let removed = match &what {
            Invalidation::Url(url) => self.remove_url(url),
            Invalidation::Prefix(prefix) => {
                lock(&self.module_variants)
                    .by_url
                    .retain(|url, _| !url.starts_with(prefix.as_str()));
                self.remove_where(|key, _| key.url().starts_with(prefix.as_str()))
            }
            Invalidation::Tag(_) | Invalidation::Groups { .. } => {
                self.remove_where(|key, tags| what.matches(key.url(), tags))
            }
        };
        self.invalidations.done(seq);
        self.stats.removed(&what, removed);
        removed
    }

    /// Objects removed and stores refused so far.
    pub fn purge_stats(&self) -> PurgeStats {
        let s = &self.stats;
        PurgeStats {
            by_url: s.by_url.load(Ordering::Relaxed),
            by_prefix: s.by_prefix.load(Ordering::Relaxed),
            by_tag: s.by_tag.load(Ordering::Relaxed),
            by_group: s.by_group.load(Ordering::Relaxed),
            refused_stores: s.refused.load(Ordering::Relaxed),
        }
    }

    fn remove_url(&self, url: &str) -> usize {
        let key = CacheKey::from_url(url);
        let mut removed = self.remove_key(&key);
        for k in self.module_variant_keys(url, true) {
            removed += self.remove_key(&k);
        }
        removed
    }

    /// Removes every object (and variant list) whose key and tags `matches` accepts.
    fn remove_where(&self, matches: impl Fn(&CacheKey, &[String]) -> bool) -> usize {
        let mut keys = Vec::new();
        self.storage.for_each(&mut |key, tags| {
            if matches(key, tags) {
                keys.push(key.clone());
            }
        });
        let mut removed = 0;
        for key in keys {
            if let Some(StoredItem::Object(_) | StoredItem::Parts(_)) = self.storage.get(&key) {
                removed += 1;
            }
            self.storage.remove(&key);
        }
        // Objects on disk are usually in memory too: count each once.
        let on_disk = self
            .disk
            .as_ref()
            .map_or(0, |d| d.invalidate_where(&matches));
        removed.max(on_disk)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use bytes::Bytes;
    use http::{request, HeaderMap, StatusCode};

    use super::*;
    use crate::{CacheSettings, CachedObject, Lookup, StoragePolicy, Ticket};

    fn cache() -> Cache {
        Cache::new(CacheSettings {
            memory_bytes: 1 << 20,
            max_object_bytes: 1 << 16,
            ..CacheSettings::default()
        })
    }

    fn get(url: &str, headers: &[(&str, &str)]) -> request::Parts {
        let mut b = http::Request::get(url);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    fn object(req: &request::Parts, headers: &[(&str, &str)]) -> CachedObject {
        let mut h = HeaderMap::new();
        h.insert("cache-control", "max-age=60".parse().unwrap());
        for (k, v) in headers {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let mut parts = http::Response::new(()).into_parts().0;
        parts.headers = h.clone();
        let now = SystemTime::now();
        let policy = StoragePolicy::new(req, &parts, now, 0.1);
        CachedObject::new(StatusCode::OK, &h, Bytes::from_static(b"x"), policy)
    }

    fn key(path: &str) -> CacheKey {
        CacheKey::for_url("http", "h", path)
    }

    /// Stores a response for `path` with `response` headers, for a request with
    /// `request` headers, under the ticket `t`.
    fn put(c: &Cache, path: &str, variant: Option<&str>, h: &[(&str, &str)], t: Ticket) -> bool {
        let req = get(&format!("http://h{path}"), &[("accept-language", "en")]);
        let mut k = key(path);
        if let Some(v) = variant {
            k = k.with_module_variant(v);
        }
        c.store(&k, &req, object(&req, h), t)
    }

    fn fresh(c: &Cache, path: &str) -> bool {
        let req = get(&format!("http://h{path}"), &[("accept-language", "en")]);
        matches!(
            c.lookup(&key(path), &req, SystemTime::now()),
            Lookup::Fresh(_)
        )
    }

    #[test]
    fn tags_come_from_the_tag_headers_and_join_the_modules() {
        let c = cache();
        let req = get("http://h/a", &[]);
        let o = object(&req, &[("surrogate-key", "k1 k2"), ("cache-tag", "t1,k1")])
            .with_tags(vec!["m".into()]);
        assert!(c.store(&key("/a"), &req, o, c.ticket()));
        let stored: Arc<CachedObject> = c.objects(&key("/a")).remove(0);
        assert_eq!(stored.tags, ["m", "k1", "k2", "t1"]);
    }

    #[test]
    fn a_url_purge_takes_every_variant_and_module_variant() {
        let c = cache();
        let t = c.ticket();
        assert!(put(&c, "/a", None, &[("vary", "accept-language")], t));
        assert!(put(&c, "/a", Some("gzip"), &[], t));
        assert!(put(&c, "/a", Some("br"), &[("vary", "accept-language")], t));
        assert!(put(&c, "/b", None, &[], t));
        assert_eq!(c.objects(&key("/a")).len(), 3);
        assert_eq!(c.invalidate(&key("/a")), 3);
        assert!(c.objects(&key("/a")).is_empty());
        assert!(fresh(&c, "/b"));
        assert_eq!(c.purge_stats().by_url, 3);
        // The fetches that started before cannot store; later ones can.
        assert!(!put(&c, "/a", Some("gzip"), &[], t));
        assert_eq!(c.purge_stats().refused_stores, 1);
        assert!(put(&c, "/a", None, &[], c.ticket()));
        assert!(put(&c, "/b", None, &[], t), "another URL is not affected");
    }

    #[test]
    fn prefix_and_tag_purges() {
        let c = cache();
        let t = c.ticket();
        assert!(put(&c, "/img/1", None, &[("surrogate-key", "red")], t));
        assert!(put(&c, "/img/2", Some("v"), &[], t));
        assert!(put(&c, "/imgx", None, &[("cache-tag", "red, blue")], t));
        assert!(put(&c, "/doc", None, &[("vary", "accept-language")], t));
        assert_eq!(c.purge(Invalidation::Prefix("http://h/img/".into())), 2);
        assert!(!fresh(&c, "/img/1") && fresh(&c, "/imgx"));
        assert!(c.objects(&key("/img/2")).is_empty());
        assert_eq!(c.purge(Invalidation::Tag("blue".into())), 1);
        assert!(!fresh(&c, "/imgx") && fresh(&c, "/doc"));
        assert_eq!(c.purge(Invalidation::Tag("none".into())), 0);
        let s = c.purge_stats();
        assert_eq!((s.by_prefix, s.by_tag), (2, 1));
        assert!(!put(&c, "/img/3", None, &[], t));
        assert!(!put(&c, "/other", None, &[("surrogate-key", "x blue")], t));
        assert!(put(&c, "/other", None, &[("surrogate-key", "x")], t));
    }

    #[test]
    fn group_purges_stay_in_their_origin_and_group() {
        let c = cache();
        let t = c.ticket();
        let groups = [("cache-groups", r#""a", "b""#)];
        assert!(put(&c, "/1", None, &groups, t));
        assert!(put(
            &c,
            "/2",
            Some("gzip"),
            &[("cache-groups", r#""b""#)],
            t
        ));
        assert!(put(
            &c,
            "/3",
            None,
            &[("cache-groups", r#""c""#), ("cache-tag", "a")],
            t
        ));
        let req = get("http://o/1", &[]);
        let other_origin = CacheKey::for_url("http", "o", "/1");
        assert!(c.store(&other_origin, &req, object(&req, &groups), t));
        let purge = |names: &[&str]| Invalidation::Groups {
            origin: "http://h".into(),
            names: names.iter().map(|n| n.to_string()).collect(),
        };
        assert_eq!(c.purge(purge(&["A"])), 0, "names are case-sensitive");
        assert_eq!(c.purge(purge(&["b"])), 2);
        assert!(!fresh(&c, "/1") && fresh(&c, "/3"));
        assert!(c.objects(&key("/2")).is_empty());
        assert_eq!(c.objects(&other_origin).len(), 1);
        assert_eq!(c.purge_stats().by_group, 2);
        assert!(!put(&c, "/4", None, &[("cache-groups", r#""b""#)], t));
        assert!(put(&c, "/4", None, &[("cache-tag", "b")], t));
    }

    #[test]
    fn the_listener_hears_every_invalidation_and_update_respects_them() {
        let c = cache();
        let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
        let h = heard.clone();
        c.on_invalidate(Box::new(move |i| h.lock().unwrap().push(i.kind())));
        assert!(put(&c, "/a", None, &[], c.ticket()));
        assert_eq!(c.update(&key("/a"), |o| o.with_policy(o.policy.clone())), 1);
        c.invalidate(&key("/a"));
        c.purge(Invalidation::Tag("t".into()));
        assert_eq!(*heard.lock().unwrap(), ["url", "tag"]);
        assert_eq!(c.update(&key("/a"), |o| o.with_policy(o.policy.clone())), 0);
    }
}
