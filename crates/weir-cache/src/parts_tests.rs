use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderValue, StatusCode};

use super::*;
use crate::{CacheSettings, Invalidation, Lookup, StoragePolicy};

fn cache() -> Cache {
    Cache::new(CacheSettings::memory(1 << 20, 1 << 16))
}

fn request() -> request::Parts {
    http::Request::get("http://h/v")
        .body(())
        .unwrap()
        .into_parts()
        .0
}

fn key() -> CacheKey {
    CacheKey::for_url("http", "h", "/v")
}

fn part(etag: &str, first: u64, body: &'static [u8], length: u64) -> Part {
    let mut headers = HeaderMap::new();
    headers.insert("cache-control", HeaderValue::from_static("max-age=60"));
    headers.insert("etag", HeaderValue::from_str(etag).unwrap());
    headers.insert("surrogate-key", HeaderValue::from_static("movie"));
    let mut parts = http::Response::new(()).into_parts().0;
    parts.headers = headers.clone();
    let policy = StoragePolicy::new(&request(), &parts, SystemTime::now(), 0.1);
    Part {
        head: CachedObject::new(StatusCode::OK, &headers, Bytes::new(), policy),
        first,
        body: Bytes::from_static(body),
        length,
    }
}

fn store(c: &Cache, p: Part) -> PartStored {
    c.store_part(&key(), &request(), p, c.ticket())
}

#[test]
fn validators_must_be_strong() {
    let h = |pairs: &[(&'static str, &'static str)]| {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(*k, HeaderValue::from_static(v));
        }
        strong_validator(&m)
    };
    assert!(h(&[("etag", "\"a\"")]).is_some());
    assert_eq!(h(&[("etag", "W/\"a\"")]), None);
    let old = "Tue, 15 Nov 1994 08:12:31 GMT";
    assert_eq!(
        h(&[("last-modified", old)]),
        None,
        "no Date to compare with"
    );
    assert!(h(&[
        ("last-modified", old),
        ("date", "Tue, 15 Nov 1994 08:13:31 GMT")
    ])
    .is_some());
    assert_eq!(
        h(&[
            ("last-modified", old),
            ("date", "Tue, 15 Nov 1994 08:13:30 GMT")
        ]),
        None,
        "modified within a minute of being sent"
    );
    assert_eq!(
        h(&[
            ("etag", "W/\"a\""),
            ("last-modified", old),
            ("date", "Tue, 15 Nov 1994 09:00:00 GMT")
        ]),
        None
    );
}

#[test]
fn content_ranges_need_a_complete_length() {
    let r = |v: &'static str| {
        let mut m = HeaderMap::new();
        m.insert("content-range", HeaderValue::from_static(v));
        content_range(&m)
    };
    assert_eq!(r("bytes 0-9/100"), Some((0, 9, 100)));
    assert_eq!(r("Bytes 5-5/6"), Some((5, 5, 6)));
    assert_eq!(r("bytes 0-9/*"), None);
    assert_eq!(r("bytes 9-0/100"), None);
    assert_eq!(r("bytes 0-100/100"), None);
    assert_eq!(r("items 0-9/100"), None);
}

#[test]
fn parts_answer_ranges_inside_them_and_combine_into_the_object() {
    let c = cache();
    assert_eq!(store(&c, part("\"a\"", 0, b"0123", 10)), PartStored::Kept);
    assert_eq!(store(&c, part("\"a\"", 7, b"789", 10)), PartStored::Kept);
    let set = c.parts(&key()).unwrap();
    assert_eq!(set.length(), 10);
    assert_eq!(set.slice(1, 3).as_deref(), Some(&b"123"[..]));
    assert_eq!(set.slice(8, 9).as_deref(), Some(&b"89"[..]));
    assert_eq!(set.slice(3, 4), None, "not inside one piece");
    assert!(matches!(
        c.lookup(&key(), &request(), SystemTime::now()),
        Lookup::Miss
    ));
    // Overlapping both pieces: they become one, the whole.
    assert_eq!(
        store(&c, part("\"a\"", 2, b"23456", 10)),
        PartStored::Completed
    );
    assert!(c.parts(&key()).is_none(), "the parts went with the store");
    let Lookup::Fresh(o) = c.lookup(&key(), &request(), SystemTime::now()) else {
        panic!("the combined object is stored");
    };
    assert_eq!(o.body.in_memory().unwrap().as_ref(), b"0123456789");
    assert_eq!(o.status, StatusCode::OK);
}

#[test]
fn another_validator_replaces_the_parts() {
    let c = cache();
    assert_eq!(store(&c, part("\"a\"", 0, b"01234", 10)), PartStored::Kept);
    assert_eq!(store(&c, part("\"b\"", 5, b"ABCDE", 10)), PartStored::Kept);
    let set = c.parts(&key()).unwrap();
    assert_eq!(
        set.slice(0, 1),
        None,
        "the older validator's bytes are gone"
    );
    assert_eq!(set.slice(5, 9).as_deref(), Some(&b"ABCDE"[..]));
    assert!(matches!(
        c.lookup(&key(), &request(), SystemTime::now()),
        Lookup::Miss
    ));
}

#[test]
fn purges_remove_parts_and_stop_older_fetches() {
    let c = cache();
    let before = c.ticket();
    assert_eq!(store(&c, part("\"a\"", 0, b"01", 10)), PartStored::Kept);
    c.purge(Invalidation::Tag("movie".into()));
    assert!(c.parts(&key()).is_none());
    let late = c.store_part(&key(), &request(), part("\"a\"", 2, b"23", 10), before);
    assert_eq!(late, PartStored::Refused);
    assert_eq!(store(&c, part("\"a\"", 0, b"01", 10)), PartStored::Kept);
    c.purge(Invalidation::Prefix("http://h/".into()));
    assert!(c.parts(&key()).is_none());
    assert_eq!(store(&c, part("\"a\"", 0, b"01", 10)), PartStored::Kept);
    c.invalidate(&key());
    assert!(c.parts(&key()).is_none());
}

#[test]
fn parts_are_bounded_and_charged() {
    let c = Cache::new(CacheSettings::memory(1 << 20, 8));
    let empty = c.size_bytes();
    assert_eq!(store(&c, part("\"a\"", 0, b"0123", 100)), PartStored::Kept);
    assert!(c.size_bytes() >= empty + 4 + 512);
    assert_eq!(
        store(&c, part("\"a\"", 10, b"abcde", 100)),
        PartStored::Refused,
        "more than the memory tier keeps of one object"
    );
    assert_eq!(store(&c, part("\"a\"", 50, b"", 100)), PartStored::Refused);
    assert_eq!(
        store(&c, part("W/\"a\"", 0, b"01", 100)),
        PartStored::Refused
    );
}
