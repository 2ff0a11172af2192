//! Tests of `Txn::state` and `Txn::state_ref`, and of the extras a finished
//! transaction leaves to the next one on its thread (`extra.rs`).

use crate::engine;
use crate::Txn;

fn txn() -> Txn {
    engine::new_txn("127.0.0.1:1".parse().unwrap(), 8)
}

/// Each of `modules` (in this order) makes a state holding its own index.
fn fill(t: &mut Txn, modules: &[usize]) {
    for &m in modules {
        engine::set_current(t, m);
        *t.state::<usize>() = m;
    }
}

#[test]
fn several_modules_keep_their_own_states() {
    // Made out of module order, more than fit inline: each finds its own again.
    let order = [5, 0, 7, 2, 1];
    let mut t = txn();
    fill(&mut t, &order);
    for &m in &order {
        engine::set_current(&mut t, m);
        assert_eq!(t.state_ref::<usize>(), Some(&m));
        assert_eq!(*t.state::<usize>(), m);
    }
    // A module that made none has none, and reads a new one.
    engine::set_current(&mut t, 3);
    assert_eq!(t.state_ref::<usize>(), None);
    assert_eq!(*t.state::<usize>(), 0);
    *t.state::<usize>() = 33;
    engine::set_current(&mut t, 5);
    assert_eq!(*t.state::<usize>(), 5);
    engine::set_current(&mut t, 3);
    assert_eq!(t.state_ref::<usize>(), Some(&33));
}

#[test]
fn state_ref_reads_what_state_made() {
    let mut t = txn();
    engine::set_current(&mut t, 1);
    assert!(
        t.state_ref::<String>().is_none(),
        "no state before the first use"
    );
    t.state::<String>().push_str("seen");
    assert_eq!(t.state_ref::<String>().map(String::as_str), Some("seen"));
    // Another type than the state's reads nothing (and does not panic).
    assert!(t.state_ref::<u8>().is_none());
    engine::set_current(&mut t, 0);
    assert!(t.state_ref::<String>().is_none(), "module 0 made none");
}

#[test]
#[should_panic(expected = "one state type per transaction")]
fn two_types_in_one_transaction_panic() {
    let mut t = txn();
    engine::set_current(&mut t, 0);
    *t.state::<u32>() = 1;
    t.state::<String>();
}

#[test]
#[should_panic(expected = "one state type per transaction")]
fn two_types_in_one_transaction_panic_among_several() {
    let mut t = txn();
    fill(&mut t, &[0, 1, 2]);
    engine::set_current(&mut t, 2);
    t.state::<String>();
}

#[test]
fn states_are_dropped_with_the_transaction() {
    use std::sync::Arc;
    let alive = Arc::new(());
    #[derive(Default)]
    struct Holds(Option<Arc<()>>);
    let mut t = txn();
    for m in 0..4 {
        engine::set_current(&mut t, m);
        t.state::<Holds>().0 = Some(alive.clone());
    }
    assert_eq!(Arc::strong_count(&alive), 5);
    drop(t);
    assert_eq!(Arc::strong_count(&alive), 1);
}

#[test]
fn the_next_transaction_on_a_thread_starts_empty() {
    use crate::{Completion, Outcome};
    let mut first = txn();
    fill(&mut first, &[0, 3]);
    first.cache().skip = true;
    first.cache().variant = Some("gzip".into());
    first.cache().tags.push("t".into());
    first.log_field("a", "b");
    let done = Completion {
        status: 200,
        bytes_in: 0,
        bytes_out: 1024,
        outcome: Outcome::Hit,
    };
    engine::set_completion(&mut first, done);
    assert_eq!(first.completion(), Some(done));
    drop(first);
    // Its extras are given back emptied and taken by the next transaction.
    let mut next = txn();
    assert_eq!(next.completion(), None);
    next.log_field("c", "d");
    assert_eq!(next.log_fields(), [("c", "d".to_string())]);
    let cache = next.cache_overrides();
    assert!(!cache.skip && cache.variant.is_none() && cache.tags.is_empty() && cache.ttl.is_none());
    for m in [0, 3] {
        engine::set_current(&mut next, m);
        assert_eq!(next.state_ref::<usize>(), None, "module {m}");
    }
}

#[test]
fn a_reused_state_starts_from_its_default_and_may_change_type() {
    let mut first = txn();
    engine::set_current(&mut first, 0);
    first.state::<String>().push_str("first");
    engine::set_current(&mut first, 1);
    *first.state::<u64>() = 7;
    drop(first);
    // The same thread's next transaction: module 0 finds an empty string again, and
    // module 1, now keeping another type (a reloaded configuration), gets one.
    let mut next = txn();
    engine::set_current(&mut next, 0);
    assert_eq!(next.state_ref::<String>(), None, "not made yet in this one");
    assert_eq!(next.state::<String>(), "");
    engine::set_current(&mut next, 1);
    assert_eq!(*next.state::<u8>(), 0);
    *next.state::<u8>() = 3;
    assert_eq!(next.state_ref::<u8>(), Some(&3));
    assert_eq!(next.state_ref::<u64>(), None);
}
