//! Recent invalidations, so that a fetch that started before one cannot store what it
//! got after it ("no resurrection").
//!
//! Every invalidation (of a URL, a URL prefix or a tag) gets the next number of a global
//! sequence and goes into a list bounded in length and in age. A fetch takes a
//! [`Ticket`], the sequence number current when it starts; storing its response is
//! permitted only if no invalidation newer than the ticket matches it. When the list
//! has forgotten invalidations newer than the ticket (the fetch is older than the
//! window), the store is refused: a lost response costs a miss, a resurrected one
//! serves content the operator removed.
//!
//! The order of operations closes the race between an invalidation and a store:
//! an invalidation is recorded (write lock), then the stored objects are removed, then
//! it is marked done. A store checks and inserts under the read lock. So a store either
//! inserted before the record, and the removal that follows finds its object, or it
//! sees the record (done or still in progress) and is refused.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

/// What an invalidation removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalidation {
    /// Every object of this URL (`http://host[:port]/path?query`): all Vary variants and
    /// module variants.
    Url(String),
    /// Every object whose URL starts with this.
    Prefix(String),
    /// Every object carrying this tag.
    Tag(String),
    /// Every object of `origin` (`http://authority`) in any of these groups
    /// (RFC 9875 `Cache-Groups`).
    Groups {
        /// `http://authority`, as cache keys begin.
        origin: String,
        /// Group names (case-sensitive).
        names: Vec<String>,
    },
}

impl Invalidation {
    /// Whether it applies to an object of `url` with `tags`.
    pub fn matches(&self, url: &str, tags: &[String]) -> bool {
        match self {
            Invalidation::Url(u) => u == url,
            Invalidation::Prefix(p) => url.starts_with(p.as_str()),
            Invalidation::Tag(t) => tags.iter().any(|x| x == t),
            Invalidation::Groups { origin, names } => {
                crate::groups::in_origin(url, origin)
                    && tags.iter().any(|t| {
                        crate::groups::group_of_tag(t).is_some_and(|g| names.iter().any(|n| n == g))
                    })
            }
        }
    }

    /// Whether it may apply to an object of `url` whose tags are not known yet (a
    /// fetch in flight).
    pub fn may_match_url(&self, url: &str) -> bool {
        match self {
            Invalidation::Tag(_) => true,
            Invalidation::Groups { origin, .. } => crate::groups::in_origin(url, origin),
            _ => self.matches(url, &[]),
        }
    }

    /// The label of its kind in metrics: `url`, `prefix`, `tag` or `group`.
    pub fn kind(&self) -> &'static str {
        match self {
            Invalidation::Url(_) => "url",
            Invalidation::Prefix(_) => "prefix",
            Invalidation::Tag(_) => "tag",
            Invalidation::Groups { .. } => "group",
        }
    }
}

/// The invalidation sequence number when a fetch started ([`crate::Cache::ticket`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

/// How long invalidations are remembered. A fetch that takes longer than this cannot
/// store its response if invalidations were forgotten meanwhile.
pub const RETAIN_FOR: Duration = Duration::from_secs(600);
/// How many invalidations are remembered at most.
pub const RETAIN_AT_MOST: usize = 16_384;

struct Entry {
    seq: u64,
    at: Instant,
    what: Invalidation,
    /// Its objects have been removed.
    done: bool,
}

#[derive(Default)]
pub(crate) struct Recent {
    entries: VecDeque<Entry>,
    /// The sequence number of the newest invalidation forgotten (0: none).
    floor: u64,
    /// Entries not yet done.
    in_progress: usize,
}

/// The list of recent invalidations.
pub(crate) struct Invalidations {
    seq: AtomicU64,
    recent: RwLock<Recent>,
    retain_for: Duration,
    retain_at_most: usize,
}

/// Permission to insert, held while inserting (an invalidation waits for it).
pub(crate) type Permit<'a> = RwLockReadGuard<'a, Recent>;

impl Invalidations {
    pub(crate) fn new(retain_for: Duration, retain_at_most: usize) -> Invalidations {
        Invalidations {
            seq: AtomicU64::new(0),
            recent: RwLock::new(Recent::default()),
            retain_for,
            retain_at_most: retain_at_most.max(1),
        }
    }

    pub(crate) fn ticket(&self) -> Ticket {
        Ticket(self.seq.load(Ordering::Acquire))
    }

    /// Records an invalidation; its objects are to be removed next, then
    /// [`Invalidations::done`] called with the number returned.
    pub(crate) fn record(&self, what: Invalidation, now: Instant) -> u64 {
        let mut recent = self.recent.write().unwrap_or_else(|e| e.into_inner());
        let seq = self.seq.load(Ordering::Relaxed) + 1;
        self.seq.store(seq, Ordering::Release);
        recent.entries.push_back(Entry {
            seq,
            at: now,
            what,
            done: false,
        });
        recent.in_progress += 1;
        // Entries in progress are never forgotten: a store must see them.
        while let Some(front) = recent.entries.front() {
            let old = now.saturating_duration_since(front.at) > self.retain_for;
            if !front.done || !(old || recent.entries.len() > self.retain_at_most) {
                break;
            }
            recent.floor = front.seq;
            recent.entries.pop_front();
        }
        seq
    }

    /// The objects of invalidation `seq` have been removed.
    pub(crate) fn done(&self, seq: u64) {
        let mut recent = self.recent.write().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = recent.entries.iter_mut().find(|e| e.seq == seq && !e.done) {
            e.done = true;
            recent.in_progress -= 1;
        }
    }

    /// Permission to store an object of `url` with `tags` fetched under `ticket`, or
    /// `None` when an invalidation since (or one still in progress) applies to it, or
    /// when the ticket is older than what the list remembers.
    pub(crate) fn permit(&self, ticket: Ticket, url: &str, tags: &[String]) -> Option<Permit<'_>> {
        let recent = self.recent.read().unwrap_or_else(|e| e.into_inner());
        let current = self.seq.load(Ordering::Acquire);
        if ticket.0 == current && recent.in_progress == 0 {
            return Some(recent);
        }
        if ticket.0 < recent.floor {
            return None;
        }
        let applies = recent
            .entries
            .iter()
            .any(|e| (e.seq > ticket.0 || !e.done) && e.what.matches(url, tags));
        (!applies).then_some(recent)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.recent.read().unwrap().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| s.to_string()).collect()
    }

    fn invalidate(list: &Invalidations, what: Invalidation, at: Instant) {
        let seq = list.record(what, at);
        list.done(seq);
    }

    #[test]
    fn a_ticket_without_later_invalidations_stores() {
        let list = Invalidations::new(RETAIN_FOR, 8);
        invalidate(
            &list,
            Invalidation::Url("http://h/a".into()),
            Instant::now(),
        );
        let t = list.ticket();
        assert!(list.permit(t, "http://h/a", &[]).is_some());
    }

    #[test]
    fn later_invalidations_refuse_what_they_match_and_only_that() {
        let list = Invalidations::new(RETAIN_FOR, 8);
        let t = list.ticket();
        let now = Instant::now();
        invalidate(&list, Invalidation::Url("http://h/a".into()), now);
        invalidate(&list, Invalidation::Prefix("http://h/img/".into()), now);
        invalidate(&list, Invalidation::Tag("news".into()), now);
        assert!(list.permit(t, "http://h/a", &[]).is_none());
        assert!(list.permit(t, "http://h/a?x", &[]).is_some());
        assert!(list.permit(t, "http://h/img/1.png", &[]).is_none());
        assert!(list.permit(t, "http://h/imgs", &[]).is_some());
        assert!(list
            .permit(t, "http://h/b", &tags(&["sport", "news"]))
            .is_none());
        assert!(list.permit(t, "http://h/b", &tags(&["sport"])).is_some());
        let group = |g: &str| crate::groups::group_tag(g);
        invalidate(
            &list,
            Invalidation::Groups {
                origin: "http://h".into(),
                names: vec!["g".into()],
            },
            now,
        );
        assert!(list.permit(t, "http://h/c", &[group("g")]).is_none());
        assert!(list.permit(t, "http://h/c", &tags(&["g"])).is_some());
        assert!(list.permit(t, "http://h/c", &[group("G")]).is_some());
        assert!(list.permit(t, "http://o/c", &[group("g")]).is_some());
        // A fetch that started after them is not affected.
        let later = list.ticket();
        assert!(list.permit(later, "http://h/a", &tags(&["news"])).is_some());
    }

    #[test]
    fn an_invalidation_in_progress_refuses_even_newer_tickets() {
        let list = Invalidations::new(RETAIN_FOR, 8);
        let seq = list.record(Invalidation::Tag("t".into()), Instant::now());
        let t = list.ticket();
        assert!(list.permit(t, "http://h/", &tags(&["t"])).is_none());
        assert!(list.permit(t, "http://h/", &tags(&["u"])).is_some());
        list.done(seq);
        assert!(list.permit(t, "http://h/", &tags(&["t"])).is_some());
    }

    #[test]
    fn tickets_older_than_the_window_are_refused() {
        let list = Invalidations::new(RETAIN_FOR, 2);
        let old = list.ticket();
        let now = Instant::now();
        for i in 0..3 {
            invalidate(&list, Invalidation::Url(format!("http://h/{i}")), now);
        }
        // The first was forgotten by count: the old ticket may have missed it.
        assert_eq!(list.len(), 2);
        assert!(list.permit(old, "http://h/unrelated", &[]).is_none());
        let recent = list.ticket();
        assert!(list.permit(recent, "http://h/unrelated", &[]).is_some());
    }

    #[test]
    fn old_entries_are_forgotten_by_age() {
        let list = Invalidations::new(Duration::from_secs(10), 100);
        let t0 = Instant::now();
        let old = list.ticket();
        invalidate(&list, Invalidation::Url("http://h/1".into()), t0);
        let middle = list.ticket();
        invalidate(&list, Invalidation::Url("http://h/2".into()), t0);
        // Eleven seconds later, recording another forgets both.
        invalidate(
            &list,
            Invalidation::Url("http://h/3".into()),
            t0 + Duration::from_secs(11),
        );
        assert_eq!(list.len(), 1);
        assert!(list.permit(old, "http://h/x", &[]).is_none());
        assert!(list.permit(middle, "http://h/x", &[]).is_none());
        let last = list.ticket();
        assert!(list.permit(last, "http://h/3", &[]).is_some());
    }

    #[test]
    fn entries_in_progress_are_never_forgotten() {
        let list = Invalidations::new(RETAIN_FOR, 1);
        let t = list.ticket();
        let slow = list.record(Invalidation::Prefix("http://h/".into()), Instant::now());
        invalidate(
            &list,
            Invalidation::Url("http://o/1".into()),
            Instant::now(),
        );
        assert_eq!(list.len(), 2);
        list.done(slow);
        // The ticket predates both, and both are still remembered.
        assert!(list.permit(t, "http://h/x", &[]).is_none());
        assert!(list.permit(t, "http://o/2", &[]).is_some());
    }
}
