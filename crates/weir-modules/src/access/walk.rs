//! The rules compiled for the hit path, and the first-match walk over them.
//!
//! Checking every condition of every rule in order costs a request a visit to each
//! rule before the one that decides. Instead, what a rule tests of a request's
//! method, scheme, port and user is kept as sets of rules (a bit per rule, a set per
//! method, scheme, range of ports), so the rules a request can still match are a few
//! intersections of words; the client's networks are then tried for the rules left,
//! and the host's domains and patterns once per host (a map from domain names to
//! rules, and one `RegexSet`), remembered per thread for the next request to the same
//! host. What all of that leaves is itself remembered per thread for the next request
//! with the same method, scheme, port, host, client and user (usually the next one on
//! a keep-alive connection). Only the rules left are visited, in order, for what no
//! set holds: the clock, a URL pattern (after its literal prefilter), a method outside
//! the standard ones. The verdict is the one of checking every condition in order
//! (`walk_tests.rs` compares the two).

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;

use std::sync::atomic::{AtomicU64, Ordering};

use regex::{RegexSet, RegexSetBuilder};

use super::bits::{self, Rows};
use super::domains::DomainMap;
use super::literals::Prefilter;
use super::rules::{
    format_url, origin_form, push_path, Action, LocalTime, RequestView, Rule, Users, Verdict,
};
use super::sieve::{self, MethodTest, Sieve};
use super::text::same;
use weir_api::http::Method;

/// Rows of the method sets: one per bit [`sieve::method_bit`] gives.
const METHOD_ROWS: usize = 16;

/// The rules in order, with the sets compiled over all of them.
#[derive(Debug)]
pub(crate) struct RuleSet {
    rules: Vec<Rule>,
    words: usize,
    /// Unique per set: names it in the thread's memo of hosts.
    id: u64,
    /// Per method bit: the rules its method can match (those naming no method too).
    by_method: Rows,
    /// Per scheme bit (`http`, `https`, none): likewise.
    by_scheme: Rows,
    /// The first port of each range over which the rules' port conditions do not
    /// change, ascending from 0, and per range the rules its ports match.
    port_starts: Box<[u16]>,
    by_port: Rows,
    /// The rules with networks, and their networks.
    clients: Box<[(usize, Sieve)]>,
    /// The rules with a condition on the host (domains or a pattern).
    host_bound: Box<[u64]>,
    no_domains: Box<[u64]>,
    domains: DomainMap,
    no_host_pattern: Box<[u64]>,
    /// Every rule's host pattern (case-insensitive), and the rule of each.
    host_patterns: Option<(RegexSet, Box<[usize]>)>,
    /// The rules with a condition the sets leave to the rule: times or days, a URL
    /// pattern; and the rules that list methods (asked for a non-standard method).
    timed: Box<[u64]>,
    url_bound: Box<[u64]>,
    lists_methods: Box<[u64]>,
    /// Per rule, the prefilter of its URL pattern.
    url_prefilters: Box<[Prefilter]>,
    /// The rules without a user condition, and those that take any user.
    anyone: Box<[u64]>,
    authenticated: Box<[u64]>,
    /// Per user named by a rule (directly or by a group): the rules that name it.
    users: HashMap<Box<str>, Box<[u64]>, foldhash::fast::RandomState>,
}

impl RuleSet {
    /// Compiles `rules`. The patterns were each compiled already; a set of host
    /// patterns too large to compile leaves them to be tried one by one.
    pub fn new(rules: Vec<Rule>) -> RuleSet {
        let words = bits::words(rules.len());
        let sieves: Vec<Sieve> = rules
            .iter()
            .map(|r| Sieve::new(&r.methods, &r.schemes, &r.clients))
            .collect();
        // `holds(row, i)`: whether rule `i` is in row `row`.
        let rows_where = |count: usize, holds: &dyn Fn(usize, usize) -> bool| {
            let mut rows = Rows::new(count, words);
            for row in 0..count {
                for i in 0..rules.len() {
                    if holds(row, i) {
                        bits::set(rows.row_mut(row), i);
                    }
                }
            }
            rows
        };
        let set_where = |holds: &dyn Fn(&Rule) -> bool| -> Box<[u64]> {
            rows_where(1, &|_, i| holds(&rules[i])).row(0).into()
        };
        let by_method = rows_where(METHOD_ROWS, &|row, i| {
            !matches!(sieves[i].method(1 << row), MethodTest::No)
        });
        let by_scheme = rows_where(3, &|row, i| sieves[i].scheme(1 << row));
        let mut starts: Vec<u16> = vec![0];
        for range in rules.iter().flat_map(|r| &r.ports) {
            starts.push(*range.start());
            starts.extend(range.end().checked_add(1));
        }
        starts.sort_unstable();
        starts.dedup();
        let by_port = rows_where(starts.len(), &|row, i| {
            let ports = &rules[i].ports;
            ports.is_empty() || ports.iter().any(|p| p.contains(&starts[row]))
        });
        let mut domains = DomainMap::new(rules.len());
        let mut users: HashMap<Box<str>, Box<[u64]>, _> = HashMap::default();
        for (i, rule) in rules.iter().enumerate() {
            for d in &rule.domains {
                domains.add(i, d);
            }
            if let Users::Named(names) = &rule.users {
                for name in names {
                    let row = users
                        .entry(name.clone())
                        .or_insert_with(|| bits::zeros(words));
                    bits::set(row, i);
                }
            }
        }
        let pattern_rules: Vec<usize> = (0..rules.len())
            .filter(|&i| rules[i].host_regex.is_some())
            .collect();
        let host_patterns = (!pattern_rules.is_empty())
            .then(|| {
                let patterns = pattern_rules
                    .iter()
                    .filter_map(|&i| rules[i].host_regex.as_ref().map(|re| re.as_str()));
                RegexSetBuilder::new(patterns)
                    .case_insensitive(true)
                    .build()
                    .ok()
            })
            .flatten()
            .map(|set| (set, pattern_rules.into_boxed_slice()));
        static IDS: AtomicU64 = AtomicU64::new(1);
        RuleSet {
            words,
            id: IDS.fetch_add(1, Ordering::Relaxed),
            by_method,
            by_scheme,
            by_port,
            port_starts: starts.into(),
            clients: (rules.iter().enumerate())
                .filter(|(_, r)| !r.clients.is_empty())
                .map(|(i, r)| (i, Sieve::new(&[], &[], &r.clients)))
                .collect(),
            host_bound: set_where(&|r| !r.domains.is_empty() || r.host_regex.is_some()),
            no_domains: set_where(&|r| r.domains.is_empty()),
            domains,
            no_host_pattern: set_where(&|r| r.host_regex.is_none()),
            host_patterns,
            timed: set_where(&|r| r.days != 0 || !r.times.is_empty()),
            url_bound: set_where(&|r| r.url_regex.is_some()),
            lists_methods: set_where(&|r| !r.methods.is_empty()),
            url_prefilters: rules
                .iter()
                .map(|r| {
                    r.url_regex
                        .as_ref()
                        .map_or(Prefilter::None, |re| Prefilter::new(re.as_str(), false))
                })
                .collect(),
            anyone: set_where(&|r| matches!(r.users, Users::Anyone)),
            authenticated: set_where(&|r| matches!(r.users, Users::Authenticated)),
            users,
            rules,
        }
    }
}

#[cfg(test)]
impl RuleSet {
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

thread_local! {
    /// The last host this thread worked out the host conditions of: (the set's id,
    /// the host, the rules whose host conditions it meets). Requests to one host
    /// follow one another, and a short comparison is cheaper than the lookups.
    static HOST_MET: RefCell<(u64, String, Vec<u64>)> =
        const { RefCell::new((0, String::new(), Vec::new())) };
    static SIFTED: RefCell<Sifted> = const {
        RefCell::new(Sifted {
            set: 0,
            port: 0,
            client: None,
            can_ask: false,
            method: None,
            scheme: String::new(),
            host: String::new(),
            user: None,
            left: Vec::new(),
            url: String::new(),
            path_at: 0,
        })
    };
}

/// Keeps in `candidates` only the rules whose host conditions `host` meets.
fn keep_host_matches(set: &RuleSet, host: &str, candidates: &mut [u64]) {
    HOST_MET.with_borrow_mut(|(id, tried, met)| {
        if *id != set.id || tried != host {
            host_matches(set, host, met);
            *id = set.id;
            tried.clear();
            tried.push_str(host);
        }
        for (c, m) in candidates.iter_mut().zip(met.iter()) {
            *c &= m;
        }
    })
}

/// The rules whose domains (if any) and host pattern (if any) match `host`.
fn host_matches(set: &RuleSet, host: &str, met: &mut Vec<u64>) {
    met.clear();
    met.extend_from_slice(&set.no_domains);
    set.domains.matching(host, met);
    let mut patterns = bits::zeros(set.words);
    bits::or(&mut patterns, &set.no_host_pattern);
    match &set.host_patterns {
        Some((regexes, rules)) => {
            for k in regexes.matches(host).iter() {
                bits::set(&mut patterns, rules[k]);
            }
        }
        None => {
            for (i, rule) in set.rules.iter().enumerate() {
                if rule.host_regex.as_ref().is_some_and(|re| re.is_match(host)) {
                    bits::set(&mut patterns, i);
                }
            }
        }
    }
    for (m, p) in met.iter_mut().zip(patterns.iter()) {
        *m &= p;
    }
}

/// The first rule that holds decides. `user` is the authenticated user; `can_ask` says
/// whether the client may be asked for credentials (not on transparent listeners,
/// whose clients do not know of the proxy: a rule that needs a user is skipped there).
pub(crate) fn decide(
    set: &RuleSet,
    request: &RequestView<'_>,
    user: Option<&str>,
    can_ask: bool,
    default: Action,
) -> Verdict {
    // Up to 256 rules on the stack; more is rare enough to allocate for.
    let mut stack = [0u64; 4];
    let mut heap = Vec::new();
    let candidates: &mut [u64] = if set.words <= stack.len() {
        &mut stack[..set.words]
    } else {
        heap.resize(set.words, 0);
        &mut heap
    };
    let method = sieve::method_bit(request.method);
    sift_remembered(set, request, user, can_ask, candidates);
    let extension = method == sieve::EXTENSION;
    let mut now = None;
    let mut url_written = false;
    for (w, &word) in candidates.iter().enumerate() {
        let to_ask =
            set.timed[w] | set.url_bound[w] | if extension { set.lists_methods[w] } else { 0 };
        let mut word = word;
        while word != 0 {
            let bit = word.trailing_zeros() as usize;
            word &= word - 1;
            let i = w * 64 + bit;
            let rule = &set.rules[i];
            if to_ask & (1 << bit) != 0 {
                if extension && !rule.methods.is_empty() && !rule.methods.contains(request.method) {
                    continue;
                }
                if set.timed[w] & (1 << bit) != 0 {
                    let now = *now.get_or_insert_with(request.clock);
                    if !in_time(rule, now) {
                        continue;
                    }
                }
                if let Some(re) = &rule.url_regex {
                    let prefilter = &set.url_prefilters[i];
                    let matched = SIFTED.with_borrow_mut(|m| {
                        if !std::mem::replace(&mut url_written, true) {
                            m.write_url(request);
                        }
                        prefilter.may_match(m.url.as_bytes()) && re.is_match(&m.url)
                    });
                    if !matched {
                        continue;
                    }
                }
            }
            if user.is_none() && set.anyone[w] & (1 << bit) == 0 {
                // The rest of the rule holds, and only credentials can make it match.
                return Verdict::Challenge;
            }
            return match rule.action {
                Action::Allow => Verdict::Allow(Some(i)),
                Action::Deny => Verdict::Deny(Some(i)),
            };
        }
    }
    match default {
        Action::Allow => Verdict::Allow(None),
        Action::Deny => Verdict::Deny(None),
    }
}

/// Keeps in `candidates` the rules that the request's method, scheme, port, user,
/// client and host leave, as the last request on this thread with the same facts left
/// them when there was one. Requests on a keep-alive connection repeat all of them
/// but the URL, and comparing them costs less than the sets' lookups and the
/// networks' tests; the clock and the URL patterns are checked per request after.
fn sift_remembered(
    set: &RuleSet,
    request: &RequestView<'_>,
    user: Option<&str>,
    can_ask: bool,
    candidates: &mut [u64],
) {
    let remembered = SIFTED.with_borrow(|m| {
        let kept = m.set == set.id
            && m.port == request.port
            && m.client == Some(request.client)
            && m.can_ask == can_ask
            && m.method.as_ref() == Some(request.method)
            && same(m.scheme.as_bytes(), request.scheme.as_bytes())
            && same(m.host.as_bytes(), request.host.as_bytes())
            && match (&m.user, user) {
                (Some(kept), Some(user)) => same(kept.as_bytes(), user.as_bytes()),
                (kept, user) => kept.is_none() && user.is_none(),
            };
        if kept {
            candidates.copy_from_slice(&m.left);
        }
        kept
    });
    if remembered {
        return;
    }
    sift(set, request, user, can_ask, candidates);
    SIFTED.with_borrow_mut(|m| {
        m.set = set.id;
        m.port = request.port;
        m.client = Some(request.client);
        m.can_ask = can_ask;
        m.method = Some(request.method.clone());
        m.scheme.clear();
        m.scheme.push_str(request.scheme);
        m.host.clear();
        m.host.push_str(request.host);
        match (&mut m.user, user) {
            (Some(kept), Some(user)) => {
                kept.clear();
                kept.push_str(user);
            }
            (kept, user) => *kept = user.map(str::to_string),
        }
        m.left.clear();
        m.left.extend_from_slice(candidates);
        m.path_at = 0;
    });
}

/// What [`sift_remembered`] keeps of the last request: the facts the sets read, and
/// the rules they left.
struct Sifted {
    /// The set's id; 0 (no set) while none.
    set: u64,
    port: u16,
    client: Option<IpAddr>,
    can_ask: bool,
    method: Option<Method>,
    scheme: String,
    host: String,
    user: Option<String>,
    left: Vec<u64>,
    /// The URL the URL patterns last matched, written here so matching allocates
    /// nothing once the buffer has grown; and where its path starts when what comes
    /// before follows from the scheme, host and port kept above (0 when not known):
    /// the next request with the same ones writes only its path.
    url: String,
    path_at: usize,
}

impl Sifted {
    /// Writes the URL of `request`, whose facts are the ones kept.
    fn write_url(&mut self, request: &RequestView<'_>) {
        if self.path_at != 0 && origin_form(request) {
            self.url.truncate(self.path_at);
            push_path(&mut self.url, request);
        } else {
            self.path_at = format_url(&mut self.url, request).unwrap_or(0);
        }
    }
}

/// Keeps in `candidates` the rules that the request's method, scheme, port, user,
/// client and host leave. Not inlined: run only when the facts kept do not serve.
#[inline(never)]
fn sift(
    set: &RuleSet,
    request: &RequestView<'_>,
    user: Option<&str>,
    can_ask: bool,
    candidates: &mut [u64],
) {
    let method = sieve::method_bit(request.method);
    let by_method = set.by_method.row(method.trailing_zeros() as usize);
    let by_scheme = set
        .by_scheme
        .row(sieve::scheme_bit(request.scheme).trailing_zeros() as usize);
    let port_range = set.port_starts.partition_point(|&s| s <= request.port) - 1;
    let by_port = set.by_port.row(port_range);
    let named = match user {
        Some(user) if !set.users.is_empty() => set.users.get(user),
        _ => None,
    };
    let mut left = 0;
    for (w, c) in candidates.iter_mut().enumerate() {
        // A rule that needs a user the request cannot give is out whatever else it
        // says; without a user, one that may ask for credentials stays in.
        let by_user = match user {
            Some(_) => set.anyone[w] | set.authenticated[w] | named.map_or(0, |n| n[w]),
            None if can_ask => !0,
            None => set.anyone[w],
        };
        *c = by_method[w] & by_scheme[w] & by_port[w] & by_user;
        left |= *c;
    }
    if left != 0 && !set.clients.is_empty() {
        let client = sieve::address(request.client);
        for (i, nets) in set.clients.iter() {
            if bits::get(candidates, *i) && !nets.client(client) {
                candidates[i / 64] &= !(1 << (i % 64));
            }
        }
    }
    if candidates
        .iter()
        .zip(set.host_bound.iter())
        .any(|(c, h)| c & h != 0)
    {
        keep_host_matches(set, request.host, candidates);
    }
}

/// Whether the rule's days and times (if any) hold at `now`.
fn in_time(rule: &Rule, now: LocalTime) -> bool {
    (rule.days == 0 || rule.days & (1 << now.weekday) != 0)
        && (rule.times.is_empty() || rule.times.iter().any(|t| t.contains(now.minute)))
}
