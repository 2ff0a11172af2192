//! Content management over the real cache, for modules and the admin API: the
//! engine's implementation of [`weir_api::ContentManager`].

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::BodyExt;
use weir_api::{
    BodyReader, BytesBody, ContentError, ContentFuture, ContentManager, ObjectInfo, StoredResponse,
};
use weir_cache::groups::group_of_tag;
use weir_cache::{Cache, CacheKey, CachedObject, Invalidation, StoragePolicy};

use crate::service::{Engine, Target};
use crate::upstream::OriginAddr;

/// The cache as modules manage it. Fetches and validations go through the same path
/// as a client's GET, on an engine without modules (so a module's call never
/// re-enters modules).
pub(crate) struct EngineContent {
    cache: Arc<Cache>,
    engine: OnceLock<Arc<Engine>>,
}

impl EngineContent {
    pub fn new(cache: Arc<Cache>) -> Arc<EngineContent> {
        Arc::new(EngineContent {
            cache,
            engine: OnceLock::new(),
        })
    }

    /// Connects the engine that fetches for `fetch` and `validate` (set once at start).
    pub fn set_engine(&self, engine: Arc<Engine>) {
        let _ = self.engine.set(engine);
    }

    /// Removes everything stored for `url` (all variants); how many objects went.
    pub fn purge_url(&self, url: &str) -> Result<usize, ContentError> {
        let (_, key) = parse(url)?;
        Ok(self.cache.invalidate(&key))
    }

    /// Invalidates the cache groups `names` of `origin` (`http://host[:port]`, a
    /// trailing `/` allowed); how many objects went. `None` when `origin` is not one.
    pub fn purge_groups(&self, origin: &str, names: Vec<String>) -> Option<usize> {
        let origin = normalize_prefix(origin.strip_suffix('/').unwrap_or(origin)).ok()?;
        if origin["http://".len()..].contains(['/', '?', '#']) {
            return None;
        }
        Some(self.cache.purge(Invalidation::Groups { origin, names }))
    }

    /// The largest body the cache stores.
    pub fn max_object(&self) -> u64 {
        self.cache.settings().max_object_bytes
    }

    /// [`ContentManager::inject`], storing nothing unless `complete()` says the body
    /// reader reached the real end of the body (a reader cannot report errors).
    pub async fn inject_checked(
        &self,
        url: &str,
        variant: Option<&str>,
        status: StatusCode,
        headers: HeaderMap,
        mut body: Box<dyn BodyReader>,
        complete: &(dyn Fn() -> bool + Sync),
    ) -> Result<ObjectInfo, ContentError> {
        let (target, mut key) = parse(url)?;
        if let Some(variant) = variant {
            // The key a request for `url` computes when a module sets this variant.
            key = key.with_module_variant(variant);
        }
        // An invalidation while the body arrives wins over it, as for a fetch.
        let ticket = self.cache.ticket();
        let limit = self.cache.settings().max_object_bytes;
        let mut all = BytesMut::new();
        while let Some(chunk) = body.next_chunk().await {
            if (all.len() + chunk.len()) as u64 > limit {
                return Err(ContentError::NotStorable);
            }
            all.extend_from_slice(&chunk);
        }
        let mut request = http::Request::new(()).into_parts().0;
        request.uri = url.parse().map_err(|_| ContentError::BadUrl(url.into()))?;
        request.headers.insert(header::HOST, target.host);
        let mut response = http::Response::new(()).into_parts().0;
        response.status = status;
        response.headers = headers;
        crate::headers::remove_hop_by_hop(&mut response.headers);
        response.headers.remove(header::CONTENT_LENGTH);
        let now = SystemTime::now();
        // Injected by the operator for a reverse proxy's audience: targeted fields count.
        let options = self.cache.settings().policy_options(true);
        let policy = StoragePolicy::with_options(&request, &response, now, &options);
        if !policy.is_worth_storing(now) {
            return Err(ContentError::NotStorable);
        }
        if !complete() {
            return Err(ContentError::Origin("the body was cut short".into()));
        }
        let object = CachedObject::new(status, &response.headers, Bytes::from(all), policy);
        if !self.cache.store(&key, &request, object, ticket) {
            return Err(ContentError::NotStorable);
        }
        self.info(url, &key)
    }

    fn info(&self, url: &str, key: &CacheKey) -> Result<ObjectInfo, ContentError> {
        let objects = self.cache.objects(key);
        let first = objects.first().ok_or(ContentError::NotFound)?;
        Ok(info_of(url, first, objects.len()))
    }

    /// GETs `url` through the cache path and reads the body to its end, so the fill
    /// completes and is stored.
    async fn get_through_cache(
        &self,
        url: &str,
        extra: Option<(header::HeaderName, HeaderValue)>,
    ) -> Result<ObjectInfo, ContentError> {
        let (target, key) = parse(url)?;
        let engine = self
            .engine
            .get()
            .ok_or_else(|| ContentError::Origin("the proxy is not running".into()))?;
        let mut parts = http::Request::new(()).into_parts().0;
        parts.method = Method::GET;
        parts.uri = url.parse().map_err(|_| ContentError::BadUrl(url.into()))?;
        parts.headers.insert(header::HOST, target.host.clone());
        if let Some((name, value)) = extra {
            parts.headers.insert(name, value);
        }
        let asked = weir_cache::RequestFields::of(&parts.headers);
        let served = crate::cached::serve(engine, parts, target, &mut None, asked, false)
            .await
            .map_err(|e| ContentError::Origin(format!("{} {}", e.status.as_u16(), e.reason)))?;
        let status = served.response.status();
        served
            .response
            .into_body()
            .collect()
            .await
            .map_err(|e| ContentError::Origin(e.to_string()))?;
        if status.is_server_error() {
            return Err(ContentError::Origin(format!("status {}", status.as_u16())));
        }
        self.info(url, &key).map_err(|_| ContentError::NotStorable)
    }
}

fn info_of(url: &str, object: &CachedObject, variants: usize) -> ObjectInfo {
    let now = SystemTime::now();
    ObjectInfo {
        url: url.to_string(),
        status: object.status,
        headers: http::HeaderMap::clone(&object.headers),
        size: object.body.len(),
        age: object.policy.age(now),
        time_to_live: object.policy.time_to_live(now),
        variants,
        tags: object
            .tags
            .iter()
            .filter(|t| group_of_tag(t).is_none())
            .cloned()
            .collect(),
        groups: object
            .tags
            .iter()
            .filter_map(|t| group_of_tag(t).map(str::to_string))
            .collect(),
    }
}

/// The target and cache key of an absolute `http://` URL, named as a forward-proxy
/// client would name it (reverse-mode objects are named by their public URL).
fn parse(url: &str) -> Result<(Target, CacheKey), ContentError> {
    let bad = || ContentError::BadUrl(url.to_string());
    let uri: http::Uri = url.parse().map_err(|_| bad())?;
    if uri.scheme_str() != Some("http") {
        return Err(bad());
    }
    let authority = uri.authority().ok_or_else(bad)?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    let port = crate::config::authority_port(authority).map_err(|_| bad())?;
    let host_header = authority.as_str().trim_end_matches(":80");
    let host_value = HeaderValue::from_str(host_header).map_err(|_| bad())?;
    let path_and_query = crate::target::origin_form(&uri);
    let key = CacheKey::for_url("http", host_header, path_and_query.as_str());
    let target = Target {
        origin: OriginAddr::http(host, port.unwrap_or(80)),
        host: host_value,
        path_and_query,
        targeted: true,
        interim: None,
    };
    Ok((target, key))
}

/// A URL prefix in the form of cache keys: `http://`, then the authority lowercased and
/// without `:80` (when the prefix goes past it).
fn normalize_prefix(prefix: &str) -> Result<String, ContentError> {
    let bad = || ContentError::BadUrl(prefix.to_string());
    let rest = prefix
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("http://"))
        .map(|_| &prefix[7..])
        .ok_or_else(bad)?;
    if rest.is_empty() || rest.starts_with('/') || rest.contains(char::is_whitespace) {
        return Err(bad());
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut authority = authority.to_ascii_lowercase();
    if !path.is_empty() && authority.ends_with(":80") {
        authority.truncate(authority.len() - 3);
    }
    Ok(format!("http://{authority}{path}"))
}

impl ContentManager for EngineContent {
    fn query(&self, url: &str) -> Result<ObjectInfo, ContentError> {
        let (_, key) = parse(url)?;
        self.info(url, &key)
    }

    fn fetch<'a>(&'a self, url: &'a str) -> ContentFuture<'a, ObjectInfo> {
        Box::pin(self.get_through_cache(url, None))
    }

    fn call<'a>(
        &'a self,
        request: http::Request<Bytes>,
        timeout: Duration,
    ) -> ContentFuture<'a, http::Response<Bytes>> {
        Box::pin(async move {
            let engine = self
                .engine
                .get()
                .ok_or_else(|| ContentError::Origin("the proxy is not running yet".to_string()))?;
            crate::callout::call(engine, request, timeout).await
        })
    }

    fn validate<'a>(&'a self, url: &'a str) -> ContentFuture<'a, ObjectInfo> {
        Box::pin(async move {
            let (_, key) = parse(url)?;
            if self.cache.objects(&key).is_empty() {
                return Err(ContentError::NotFound);
            }
            // max-age=0 makes the stored copy stale for this request: a conditional
            // request to the origin follows, and its answer updates the store.
            let directive = (header::CACHE_CONTROL, HeaderValue::from_static("max-age=0"));
            self.get_through_cache(url, Some(directive)).await
        })
    }

    fn set_expiry(&self, url: &str, ttl: Duration) -> Result<(), ContentError> {
        let (_, key) = parse(url)?;
        let now = SystemTime::now();
        match self.cache.update(&key, |o| {
            o.with_policy(o.policy.clone().with_time_to_live(now, ttl))
        }) {
            0 => Err(ContentError::NotFound),
            _ => Ok(()),
        }
    }

    fn delete(&self, url: &str) -> Result<(), ContentError> {
        match self.purge_url(url)? {
            0 => Err(ContentError::NotFound),
            _ => Ok(()),
        }
    }

    fn purge_prefix(&self, prefix: &str) -> Result<usize, ContentError> {
        let prefix = normalize_prefix(prefix)?;
        Ok(self.cache.purge(Invalidation::Prefix(prefix)))
    }

    fn ban_tag(&self, tag: &str) -> Result<usize, ContentError> {
        // Group memberships are kept as marked tags; a ban by tag never reaches them.
        if group_of_tag(tag).is_some() {
            return Ok(0);
        }
        Ok(self.cache.purge(Invalidation::Tag(tag.to_string())))
    }

    fn inject<'a>(
        &'a self,
        url: &'a str,
        status: StatusCode,
        headers: HeaderMap,
        body: Box<dyn BodyReader>,
    ) -> ContentFuture<'a, ObjectInfo> {
        Box::pin(self.inject_checked(url, None, status, headers, body, &|| true))
    }

    fn inject_variant<'a>(
        &'a self,
        url: &'a str,
        variant: &'a str,
        status: StatusCode,
        headers: HeaderMap,
        body: Box<dyn BodyReader>,
    ) -> ContentFuture<'a, ObjectInfo> {
        Box::pin(self.inject_checked(url, Some(variant), status, headers, body, &|| true))
    }

    fn read(&self, url: &str) -> Result<StoredResponse, ContentError> {
        let (_, key) = parse(url)?;
        let objects = self.cache.objects(&key);
        let first = objects.first().ok_or(ContentError::NotFound)?;
        Ok(StoredResponse {
            info: info_of(url, first, objects.len()),
            body: match first.body.in_memory() {
                Some(b) => BytesBody::boxed(b.clone()),
                None => Box::new(StoredBody(first.body.reader())),
            },
        })
    }
}

/// A body streamed from the disk tier, for modules. A damaged body ends early (the
/// damage is logged and counted by the cache).
struct StoredBody(weir_cache::BodyReader);

impl weir_api::BodyReader for StoredBody {
    fn next_chunk(
        &mut self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Bytes>> + Send + '_>> {
        Box::pin(async move { self.0.next_chunk().await.and_then(Result::ok) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content() -> Arc<EngineContent> {
        EngineContent::new(Arc::new(Cache::new(weir_cache::CacheSettings::memory(
            1 << 20,
            1 << 16,
        ))))
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn inject_query_read_expire_delete() {
        let c = content();
        let url = "http://example.test/a";
        let mut h = HeaderMap::new();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=60"),
        );
        let info = rt()
            .block_on(c.inject(url, StatusCode::OK, h, BytesBody::boxed("hello")))
            .unwrap();
        assert_eq!(info.size, 5);
        assert!(info.time_to_live > Duration::from_secs(50));
        assert_eq!(c.query("http://example.test:80/a").unwrap().size, 5);
        let mut stored = c.read(url).unwrap();
        assert_eq!(rt().block_on(stored.body.next_chunk()).unwrap(), "hello");
        c.set_expiry(url, Duration::ZERO).unwrap();
        assert_eq!(c.query(url).unwrap().time_to_live, Duration::ZERO);
        c.delete(url).unwrap();
        assert_eq!(c.query(url).unwrap_err(), ContentError::NotFound);
        assert_eq!(c.delete(url).unwrap_err(), ContentError::NotFound);
    }

    #[test]
    fn inject_variant_stores_under_the_module_variant_key() {
        let c = content();
        let url = "http://example.test/ad.gif";
        let mut h = HeaderMap::new();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=60"),
        );
        rt().block_on(c.inject_variant(url, "adblock", StatusCode::OK, h, BytesBody::boxed("gif")))
            .unwrap();
        let (_, key) = parse(url).unwrap();
        let request = http::Request::get(url).body(()).unwrap().into_parts().0;
        let now = SystemTime::now();
        let found = c
            .cache
            .lookup(&key.with_module_variant("adblock"), &request, now);
        assert!(matches!(found, weir_cache::Lookup::Fresh(_)));
        // Not the plain URL's object, but the URL's calls reach it.
        assert!(matches!(
            c.cache.lookup(&key, &request, now),
            weir_cache::Lookup::Miss
        ));
        assert_eq!(c.query(url).unwrap().size, 3);
        c.delete(url).unwrap();
        assert_eq!(c.query(url).unwrap_err(), ContentError::NotFound);
    }

    #[test]
    fn prefixes_take_the_form_of_keys() {
        let n = |p| normalize_prefix(p).unwrap();
        assert_eq!(n("http://Example.COM:80/Img/"), "http://example.com/Img/");
        assert_eq!(n("HTTP://h:8080"), "http://h:8080");
        assert_eq!(n("http://h:80"), "http://h:80");
        for bad in [
            "",
            "http://",
            "https://h/",
            "/a",
            "http:///a",
            "http://a b/",
        ] {
            assert!(normalize_prefix(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refuses_what_may_not_be_stored_and_bad_urls() {
        let c = content();
        let mut h = HeaderMap::new();
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        let r = rt().block_on(c.inject(
            "http://example.test/b",
            StatusCode::OK,
            h,
            BytesBody::boxed("x"),
        ));
        assert_eq!(r.unwrap_err(), ContentError::NotStorable);
        assert!(matches!(
            c.query("https://x/"),
            Err(ContentError::BadUrl(_))
        ));
        assert!(matches!(c.query("/relative"), Err(ContentError::BadUrl(_))));
        let r = rt().block_on(c.fetch("http://example.test/c"));
        assert!(matches!(r, Err(ContentError::Origin(_))));
    }
}
