//! Partial content (RFC 9111 §3.3, §3.4): the 206 responses of a URL kept as parts of
//! its object, so that a later range inside one is a hit, and combined into the
//! complete object once they cover it.
//!
//! A URL's parts live in the memory tier under their own key (`CacheKey::parts`),
//! charged like any entry, as one immutable [`PartSet`] replaced on every new part.
//! Only parts with the same strong validator and complete length are combined; a part
//! with another replaces them all. Pieces that overlap or touch are merged on arrival,
//! so a range is answered from one piece or not at all.

use std::sync::Arc;

use http::{header, request, HeaderMap};

use crate::cache::Cache;
use crate::invalidation::Ticket;
use crate::key::CacheKey;
use crate::lock::lock;
use crate::object::CachedObject;
use crate::part_set::{Part, PartSet};
use crate::storage::StoredItem;

/// Differences smaller than this between `Last-Modified` and `Date` make
/// `Last-Modified` a weak validator (RFC 9110 §8.8.2.2).
const STRONG_DATE_MARGIN: u64 = 60;

/// What [`Cache::store_part`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum PartStored {
    /// Not kept: no strong validator, `Vary`, bytes beyond the length, more bytes than
    /// the memory tier keeps for one object, or an invalidation since the ticket.
    Refused,
    /// Kept with the URL's other parts.
    Kept,
    /// The parts covered the whole representation: stored as a complete object.
    Completed,
}

/// The strong validator of a response, if it has one (RFC 9110 §8.8.1): a strong
/// entity tag, or without any entity tag a `Last-Modified` at least 60 seconds before
/// its `Date` (§8.8.2.2). A weak entity tag makes the response have none, whatever its
/// `Last-Modified`: the origin says its bytes may change under one validator.
pub fn strong_validator(headers: &HeaderMap) -> Option<String> {
    if let Some(etag) = headers.get(header::ETAG) {
        let etag = etag.to_str().ok()?.trim();
        return (etag.starts_with('"') && etag.len() >= 2 && etag.ends_with('"'))
            .then(|| format!("etag {etag}"));
    }
    let date = |name| {
        let value = headers.get(name)?.to_str().ok()?;
        httpdate::parse_http_date(value).ok()
    };
    let modified = date(header::LAST_MODIFIED)?;
    let sent = date(header::DATE)?;
    let margin = sent.duration_since(modified).ok()?.as_secs();
    let seconds = modified
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    (margin >= STRONG_DATE_MARGIN).then(|| format!("modified {seconds}"))
}

/// A single `Content-Range: bytes FIRST-LAST/LENGTH` with a known complete length, as
/// `(first, last, length)`.
pub fn content_range(headers: &HeaderMap) -> Option<(u64, u64, u64)> {
    let mut values = headers.get_all(header::CONTENT_RANGE).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?.trim();
    let unit = value.get(..6)?;
    if !unit.eq_ignore_ascii_case("bytes ") {
        return None;
    }
    let (range, length) = value[6..].split_once('/')?;
    let (first, last) = range.trim().split_once('-')?;
    let number = |s: &str| -> Option<u64> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (first, last, length) = (number(first)?, number(last)?, number(length)?);
    (first <= last && last < length).then_some((first, last, length))
}

impl Cache {
    /// Keeps `part`, a 206 fetched under `ticket`, with the other parts of `key`'s
    /// object when they share its strong validator and length (else it replaces them),
    /// and stores the complete object through [`Cache::store`] once they cover it.
    /// The parts of a URL hold at most what the memory tier keeps of one object.
    pub fn store_part(
        &self,
        key: &CacheKey,
        request: &request::Parts,
        part: Part,
        ticket: Ticket,
    ) -> PartStored {
        let Some(validator) = strong_validator(&part.head.headers) else {
            return PartStored::Refused;
        };
        let end = part.first + part.body.len() as u64;
        if !part.head.vary.is_empty() || part.body.is_empty() || end > part.length {
            return PartStored::Refused;
        }
        let tags = self.object_tags(&part.head.headers);
        let part = Part {
            head: part.head.add_tags(tags),
            ..part
        };
        let parts_key = key.parts();
        let complete = {
            // One part at a time: two arriving together must not each drop the other.
            let _one = lock(&self.parts_lock);
            let Some(_permit) = self
                .invalidations
                .permit(ticket, key.url(), &part.head.tags)
            else {
                self.stats.refused();
                return PartStored::Refused;
            };
            let old = match self.storage.get(&parts_key) {
                Some(StoredItem::Parts(old))
                    if *old.validator == *validator && old.length == part.length =>
                {
                    Some(old)
                }
                _ => None,
            };
            let set = PartSet::with(old.as_deref(), part, validator.into());
            if set.held() > self.memory_object_limit() {
                return PartStored::Refused;
            }
            match set.complete() {
                Some(body) => Some((set.head, body)),
                None => {
                    if key.has_module_variant() {
                        self.index_module_variant(key);
                    }
                    self.parts_kept
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    self.storage
                        .insert(parts_key.clone(), StoredItem::Parts(Arc::new(set)));
                    None
                }
            }
        };
        let Some((head, body)) = complete else {
            return PartStored::Kept;
        };
        let object = CachedObject::new(head.status, &head.headers, body, head.policy.clone())
            .with_tags(head.tags.clone());
        if self.store(key, request, object, ticket) {
            PartStored::Completed
        } else {
            self.storage.remove(&parts_key);
            PartStored::Refused
        }
    }

    /// The parts kept of `key`'s object.
    pub fn parts(&self, key: &CacheKey) -> Option<Arc<PartSet>> {
        match self.storage.get(&key.parts()) {
            Some(StoredItem::Parts(set)) => Some(set),
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "parts_tests.rs"]
mod tests;
