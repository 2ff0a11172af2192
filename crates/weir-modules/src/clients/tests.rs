use std::time::{Duration, Instant};

use super::limits::{quota_period, until_reset, LimitState};
use super::table::Table;
use super::*;

#[test]
fn the_table_stays_bounded_and_counts_the_busiest_exactly() {
    let mut table: Table<u32> = Table::new(10);
    // Three heavy keys among 10,000 light ones seen once each.
    for round in 0..10_000u32 {
        for heavy in 0..3 {
            table.entry(&heavy, || heavy).figures.requests += 1;
        }
        let light = 1000 + round;
        table.entry(&light, || light).figures.requests += 1;
    }
    assert_eq!(table.len(), 10);
    let top = table.top(3);
    for e in &top {
        assert!(e.key < 3, "a heavy key leads: {:?}", e.key);
        assert_eq!(e.figures.requests, 10_000, "exact");
        assert_eq!(e.figures.error, 0);
    }
    assert!(table.replaced() > 9_000);
}

#[test]
fn the_rate_bucket_refuses_past_the_burst_and_refills() {
    let mut s = LimitState::default();
    let t0 = Instant::now();
    assert!(s.take_request(2.0, 2.0, t0).is_ok());
    assert!(s.take_request(2.0, 2.0, t0).is_ok());
    assert_eq!(s.take_request(2.0, 2.0, t0), Err(1));
    assert!(s
        .take_request(2.0, 2.0, t0 + Duration::from_millis(500))
        .is_ok());
    let mut slow = LimitState::default();
    slow.take_request(0.1, 1.0, t0).unwrap();
    assert_eq!(
        slow.take_request(0.1, 1.0, t0),
        Err(10),
        "Retry-After in seconds"
    );
}

#[test]
fn shaping_delays_what_exceeds_the_bucket_at_the_rate() {
    let mut s = LimitState::default();
    let t0 = Instant::now();
    assert_eq!(s.shape(1000, 1000.0, 1000.0, t0), Duration::ZERO);
    assert_eq!(s.shape(500, 1000.0, 1000.0, t0), Duration::from_millis(500));
    // Debt accumulates: a parallel chunk waits behind the first.
    assert_eq!(s.shape(500, 1000.0, 1000.0, t0), Duration::from_secs(1));
}

#[test]
fn quota_periods_start_at_the_reset_time() {
    let day = 86_400;
    let reset = 4 * 3600;
    let midnight = 100 * day;
    assert_eq!(
        quota_period(midnight + reset - 1, reset) + 1,
        quota_period(midnight + reset, reset)
    );
    assert_eq!(until_reset(midnight, reset), reset);
    assert_eq!(until_reset(midnight + reset, reset), day);
    let mut s = LimitState::default();
    s.use_quota(700, 5);
    assert_eq!(s.quota_used_in(5), 700);
    assert_eq!(s.quota_used_in(6), 0, "a new period starts afresh");
}

#[test]
fn a_refused_request_gets_429_with_retry_after_and_is_counted() {
    let settings = Settings::parse("rate = 1\nburst = 1").unwrap();
    let module = ClientsFactory
        .build(&settings, &ModuleContext::detached())
        .unwrap();
    assert!(module.events().contains(Event::RequestHeaders));
    assert!(
        !module.events().contains(Event::DeliverBody),
        "no shaping, no body events"
    );
    let mut request = weir_api::http::Request::new(()).into_parts().0;
    let mut txn = weir_api::engine::new_txn("127.0.0.9:1".parse().unwrap(), 1);
    assert!(matches!(
        module.on_request_headers(&mut txn, &mut request),
        Flow::Continue
    ));
    let mut txn = weir_api::engine::new_txn("127.0.0.9:2".parse().unwrap(), 1);
    match module.on_request_headers(&mut txn, &mut request) {
        Flow::Respond(reply) => {
            assert_eq!(reply.status, 429);
            assert_eq!(reply.headers["retry-after"], "1");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let mut other_client = weir_api::engine::new_txn("127.0.0.10:1".parse().unwrap(), 1);
    assert!(matches!(
        module.on_request_headers(&mut other_client, &mut request),
        Flow::Continue
    ));
}

#[test]
fn counting_only_listens_to_the_log_event() {
    let module = ClientsFactory
        .build(&Settings::default(), &ModuleContext::detached())
        .unwrap();
    for event in Event::ALL {
        assert_eq!(
            module.events().contains(event),
            event == Event::Log,
            "{}",
            event.name()
        );
    }
}
