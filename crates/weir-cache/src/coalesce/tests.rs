//! The coalescer's tests.
use bytes::Bytes;

use super::*;

fn key() -> CacheKey {
    CacheKey::for_url("http", "h", "/")
}

#[tokio::test]
async fn followers_read_everything_the_leader_wrote() {
    let c: Coalescer<u16> = Coalescer::new();
    let Ok(Join::Leader(flight, mut leader)) = c.join(&key(), || None::<()>) else {
        panic!("first join leads")
    };
    flight.set_head(200);
    flight.push(Bytes::from_static(b"ab")).await;
    let Ok(Join::Follower(mut late)) = c.join(&key(), || None::<()>) else {
        panic!("second join follows")
    };
    flight.push(Bytes::from_static(b"cd")).await;
    flight.finish(true);
    for r in [&mut leader, &mut late] {
        assert_eq!(r.head().await, Some(200));
        let mut body = Vec::new();
        while let Some(c) = r.next_chunk().await {
            body.extend_from_slice(&c.unwrap());
        }
        assert_eq!(body, b"abcd");
    }
    assert_eq!(flight.retained_body().unwrap().len(), 2);
}

#[tokio::test]
async fn dropping_every_reader_abandons_the_flight() {
    let c: Coalescer<u16> = Coalescer::new();
    let Ok(Join::Leader(flight, leader)) = c.join(&key(), || None::<()>) else {
        panic!()
    };
    assert!(!flight.is_abandoned());
    drop(leader);
    flight.abandoned().await;
    assert!(flight.is_abandoned());
}

#[tokio::test]
async fn a_non_retaining_flight_drops_read_chunks() {
    let c: Coalescer<u16> = Coalescer::new();
    let Ok(Join::Leader(flight, mut r)) = c.join(&key(), || None::<()>) else {
        panic!()
    };
    flight.stop_retaining();
    assert!(c
        .join(&key(), || None::<()>)
        .is_ok_and(|j| matches!(j, Join::Leader(..))));
    flight.push(Bytes::from(vec![0u8; 1000])).await;
    r.next_chunk().await.unwrap().unwrap();
    assert_eq!(lock(&flight.state).buffered, 0);
    assert!(flight.retained_body().is_none());
}

#[tokio::test]
async fn recheck_short_circuits_when_no_flight() {
    let c: Coalescer<u16> = Coalescer::new();
    assert!(matches!(c.join(&key(), || Some(7)), Err(7)));
    assert!(c.is_empty());
}

#[tokio::test]
async fn a_no_cache_request_starts_a_fetch_that_later_ones_share() {
    let c: Coalescer<u16> = Coalescer::new();
    let Ok(Join::Leader(old, _old_reader)) = c.join(&key(), || None::<()>) else {
        panic!("first join leads")
    };
    // `After` neither joins the fetch in flight nor takes a just-stored copy.
    let Ok(Join::Leader(new, _new_reader)) = c.join_as(&key(), Sharing::After, || Some(())) else {
        panic!("a no-cache request leads a fetch of its own")
    };
    assert!(!Arc::ptr_eq(&old, &new));
    // The next ordinary request shares the newer fetch.
    let Ok(Join::Follower(_follower)) = c.join(&key(), || None::<()>) else {
        panic!("a later request follows")
    };
    assert_eq!(lock(&new.state).readers.len(), 2);
    assert_eq!(lock(&old.state).readers.len(), 1);
    // The old fetch ending does not remove the newer one from the table.
    c.leave(&key(), &old);
    assert_eq!(c.len(), 1);
}

#[tokio::test]
async fn alone_never_shares() {
    let c: Coalescer<u16> = Coalescer::new();
    let Ok(Join::Leader(first, _r1)) = c.join_as(&key(), Sharing::Alone, || None::<()>) else {
        panic!()
    };
    let Ok(Join::Leader(second, _r2)) = c.join_as(&key(), Sharing::Alone, || None::<()>) else {
        panic!("collapsing off: a fetch of its own")
    };
    assert!(!Arc::ptr_eq(&first, &second));
    assert!(c.is_empty());
    assert!(matches!(
        c.join_as(&key(), Sharing::Alone, || Some(7)),
        Err(7)
    ));
}

/// The table is in shards: flights of many keys are spread over them, and each is
/// still found by its key, counted, detached and left, whichever shard holds it.
#[tokio::test]
async fn flights_of_many_keys_are_found_counted_and_detached_in_every_shard() {
    let c: Coalescer<u16> = Coalescer::new();
    let keys: Vec<CacheKey> = (0..500)
        .map(|i| CacheKey::for_url("http", "h", &format!("/{i}")))
        .collect();
    let shards: std::collections::HashSet<usize> = keys
        .iter()
        .map(|k| std::ptr::from_ref(c.shard(k)) as usize)
        .collect();
    assert!(
        shards.len() > SHARDS / 2,
        "keys spread over {} shards",
        shards.len()
    );
    let mut flights = Vec::new();
    for k in &keys {
        let Ok(Join::Leader(flight, reader)) = c.join(k, || None::<()>) else {
            panic!("the first request for {k:?} leads")
        };
        flights.push((flight, reader));
    }
    assert_eq!(c.len(), keys.len());
    for k in &keys {
        assert!(matches!(c.join(k, || None::<()>), Ok(Join::Follower(_))));
    }
    // The odd paths are detached, wherever they are.
    let detached = c.detach(|k| {
        k.url()
            .trim_start_matches("http://h/")
            .parse::<u32>()
            .unwrap()
            % 2
            == 1
    });
    assert_eq!(detached, keys.len() / 2);
    assert_eq!(c.len(), keys.len() / 2);
    for (k, (flight, _)) in keys.iter().zip(&flights) {
        c.leave(k, flight);
    }
    assert!(c.is_empty());
}

/// A spill file in the system's temporary directory (removed with the spill), its
/// body after 16 bytes of room as the disk tier's are.
fn spill() -> crate::spill::Spill {
    let path = std::env::temp_dir().join(format!(
        "weir-coalesce-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let on_error: crate::spill::OnWriteError = std::sync::Arc::new(|_: &std::io::Error| {});
    crate::spill::Spill::new(file, crate::temp_name::TempName::new(path), 16, on_error)
}

#[tokio::test]
async fn a_spilled_flight_keeps_only_what_is_not_on_disk_and_late_readers_read_it_back() {
    let c: Coalescer<u16> = Coalescer::new();
    let Ok(Join::Leader(flight, mut early)) = c.join(&key(), || None::<()>) else {
        panic!()
    };
    flight.set_head(200);
    let chunk = |i: u8| Bytes::from(vec![i; 100_000]);
    let mut spill = spill();
    let mut expected = Vec::new();
    for i in 0..3 {
        flight.push(chunk(i)).await;
        expected.extend_from_slice(&chunk(i));
    }
    // Off to disk: what was kept so far is written, and leaves memory.
    spill.append(flight.retained_body().unwrap()).await.unwrap();
    flight.spill_to(spill.file(), spill.len());
    assert_eq!(flight.buffered(), 0);
    for i in 3..6 {
        flight.push(chunk(i)).await;
        spill.append(vec![chunk(i)]).await.unwrap();
        flight.persisted(spill.len());
        expected.extend_from_slice(&chunk(i));
        assert_eq!(flight.buffered(), 0, "a persisted chunk stays in memory");
    }
    flight.push(chunk(6)).await;
    expected.extend_from_slice(&chunk(6));
    assert_eq!(flight.buffered(), 100_000);
    // A client joining now starts from the file.
    let Ok(Join::Follower(mut late)) = c.join(&key(), || None::<()>) else {
        panic!("a spilled flight still takes followers")
    };
    flight.finish(true);
    for r in [&mut early, &mut late] {
        let mut body = Vec::new();
        while let Some(c) = r.next_chunk().await {
            body.extend_from_slice(&c.unwrap());
        }
        assert!(body == expected, "a reader got other bytes");
    }
    spill.append(vec![chunk(6)]).await.unwrap();
    let stored = spill.finish();
    assert_eq!(stored.len(), 700_000);
    let mut reader = stored.reader();
    let mut back = Vec::new();
    while let Some(c) = reader.next_chunk().await {
        back.extend_from_slice(&c.unwrap());
    }
    assert!(back == expected, "the stored body differs");
}

#[tokio::test]
async fn the_writer_is_woken_when_a_slow_reader_makes_room_and_when_the_last_one_leaves() {
    use std::time::Duration;
    let c: Coalescer<u16> = Coalescer::new();
    let Ok(Join::Leader(flight, mut r)) = c.join(&key(), || None::<()>) else {
        panic!()
    };
    flight.stop_retaining();
    // Past the window: the push waits until the reader reads.
    let pushed = {
        let flight = flight.clone();
        tokio::spawn(async move { flight.push(Bytes::from(vec![0u8; 2 << 20])).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!pushed.is_finished(), "the push did not wait for room");
    let reader = tokio::spawn(async move {
        r.next_chunk().await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(r);
    });
    tokio::time::timeout(Duration::from_secs(5), pushed)
        .await
        .expect("the reader's progress woke the writer")
        .unwrap();
    // Waiting already when the last reader leaves.
    tokio::time::timeout(Duration::from_secs(5), flight.abandoned())
        .await
        .expect("the reader's departure woke the writer");
    reader.await.unwrap();
}

#[tokio::test]
async fn a_writer_dropped_before_the_end_fails_the_flight_and_the_next_request_leads() {
    let c: Coalescer<u16> = Coalescer::new();
    let Ok(Join::Leader(flight, mut leader)) = c.join(&key(), || None::<()>) else {
        panic!("first join leads")
    };
    let Ok(Join::Follower(mut follower)) = c.join(&key(), || None::<()>) else {
        panic!("second join follows")
    };
    let waiting = tokio::spawn(async move { follower.head().await });
    tokio::task::yield_now().await;
    // As when the fetch writing it panics: no head, no end.
    drop(flight);
    let head = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await;
    assert_eq!(head.expect("the waiting reader was woken").unwrap(), None);
    assert_eq!(leader.head().await, None);
    assert_eq!(leader.next_chunk().await, Some(Err(())));
    assert!(matches!(
        c.join(&key(), || None::<()>),
        Ok(Join::Leader(..))
    ));
}

#[tokio::test]
async fn a_writer_dropped_after_the_end_changes_nothing() {
    let c: Coalescer<u16> = Coalescer::new();
    let Ok(Join::Leader(flight, mut r)) = c.join(&key(), || None::<()>) else {
        panic!()
    };
    flight.set_head(200);
    flight.push(Bytes::from_static(b"ab")).await;
    flight.finish(true);
    drop(flight);
    assert_eq!(r.head().await, Some(200));
    assert_eq!(r.next_chunk().await, Some(Ok(Bytes::from_static(b"ab"))));
    assert_eq!(r.next_chunk().await, None);
}
