//! The memory tier through the cache's public calls: the largest object it is meant to
//! keep is kept, and the bound on what it holds holds.

use std::time::SystemTime;

use weir_cache::{Cache, CacheKey, CacheSettings, CachedObject, Lookup, StoragePolicy};

#[test]
fn the_largest_storable_object_is_kept_and_the_bound_holds() {
    let mib = 1u64 << 20;
    let cache = Cache::new(CacheSettings::memory(64 * mib, 16 * mib));
    let request = http::Request::get("http://h/")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    let mut response = http::Response::new(()).into_parts().0;
    response
        .headers
        .insert("cache-control", "max-age=60".parse().unwrap());
    let now = SystemTime::now();
    let object = |size: u64| {
        let policy = StoragePolicy::new(&request, &response, now, 0.1);
        let body = bytes::Bytes::from(vec![b'x'; size as usize]);
        CachedObject::new(http::StatusCode::OK, &response.headers, body, policy)
    };
    for i in 0..200 {
        let key = CacheKey::for_url("http", "h", &format!("/{i}"));
        assert!(cache.store(&key, &request, object(mib), cache.ticket()));
    }
    assert!(
        cache.size_bytes() <= 64 * mib,
        "{} bytes",
        cache.size_bytes()
    );
    let largest = CacheKey::for_url("http", "h", "/largest");
    assert!(cache.store(&largest, &request, object(16 * mib), cache.ticket()));
    assert!(matches!(
        cache.lookup(&largest, &request, now),
        Lookup::Fresh(o) if o.body.len() == 16 * mib
    ));
    assert!(
        cache.size_bytes() <= 64 * mib,
        "{} bytes",
        cache.size_bytes()
    );
}
