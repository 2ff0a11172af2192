//! Content management: what a module (and the admin API) may do with the cache
//! directly, as the paper's `DR_Obj*` calls did.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

/// A future returned by the content manager.
pub type ContentFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ContentError>> + Send + 'a>>;

/// What the cache holds for a URL.
#[derive(Debug, Clone)]
pub struct ObjectInfo {
    /// The URL, as the cache names it.
    pub url: String,
    /// Stored status.
    pub status: StatusCode,
    /// Stored headers.
    pub headers: HeaderMap,
    /// Body size in bytes.
    pub size: u64,
    /// Seconds since the response was generated (its `Age`).
    pub age: Duration,
    /// How much longer it is fresh (zero when stale).
    pub time_to_live: Duration,
    /// How many Vary variants the URL has stored (1 without Vary).
    pub variants: usize,
    /// Invalidation tags: those attached by modules ([`crate::CacheOverrides::tags`])
    /// and those of the response's tag headers (`Surrogate-Key`, `Cache-Tag`).
    pub tags: Vec<String>,
    /// The cache groups of its origin it belongs to (RFC 9875 `Cache-Groups`).
    pub groups: Vec<String>,
}

/// A stored body, read chunk by chunk (a disk tier streams it).
pub trait BodyReader: Send {
    /// The next chunk, or `None` at the end.
    fn next_chunk(&mut self) -> Pin<Box<dyn Future<Output = Option<Bytes>> + Send + '_>>;
}

/// A stored response: head and a body reader.
pub struct StoredResponse {
    /// What the cache holds.
    pub info: ObjectInfo,
    /// The body.
    pub body: Box<dyn BodyReader>,
}

/// A content-management call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentError {
    /// The URL is not an absolute `http://` URL.
    BadUrl(String),
    /// Nothing is stored for the URL.
    NotFound,
    /// The response may not be stored (no-store, private, ...), so it was not.
    NotStorable,
    /// The origin could not be reached or answered with an error.
    Origin(String),
}

impl std::fmt::Display for ContentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContentError::BadUrl(u) => write!(f, "`{u}` is not an absolute http:// URL"),
            ContentError::NotFound => f.write_str("not in the cache"),
            ContentError::NotStorable => f.write_str("the response may not be stored"),
            ContentError::Origin(e) => write!(f, "origin: {e}"),
        }
    }
}

impl std::error::Error for ContentError {}

/// The cache, as modules manage it. URLs are absolute (`http://host[:port]/path`);
/// calls apply to the GET response stored for the URL, all variants included.
pub trait ContentManager: Send + Sync {
    /// What is stored for `url`.
    fn query(&self, url: &str) -> Result<ObjectInfo, ContentError>;

    /// Fetches `url` from its origin into the cache (preload), as a client's GET would.
    fn fetch<'a>(&'a self, url: &'a str) -> ContentFuture<'a, ObjectInfo>;

    /// Validates the stored copy with the origin now (a conditional request).
    fn validate<'a>(&'a self, url: &'a str) -> ContentFuture<'a, ObjectInfo>;

    /// Makes the stored copy fresh for `ttl` from now (zero makes it stale at once).
    fn set_expiry(&self, url: &str, ttl: Duration) -> Result<(), ContentError>;

    /// Removes everything stored for `url`. A fetch of it already under way when this
    /// is called does not store its response.
    fn delete(&self, url: &str) -> Result<(), ContentError>;

    /// Removes every object whose URL starts with `prefix` (an absolute `http://`
    /// URL, or the start of one: `http://host/images/`). Fetches already under way for
    /// those URLs do not store their responses. Returns how many objects were removed.
    /// Walks the whole cache.
    fn purge_prefix(&self, prefix: &str) -> Result<usize, ContentError>;

    /// Removes every object carrying `tag`, and keeps fetches under way from storing a
    /// response that carries it. Returns how many objects were removed. Walks the
    /// whole cache.
    fn ban_tag(&self, tag: &str) -> Result<usize, ContentError>;

    /// Stores a response for `url` without asking the origin. The response's own
    /// headers say how long it is fresh; it must be storable.
    fn inject<'a>(
        &'a self,
        url: &'a str,
        status: StatusCode,
        headers: HeaderMap,
        body: Box<dyn BodyReader>,
    ) -> ContentFuture<'a, ObjectInfo>;

    /// Reads what is stored for `url`.
    fn read(&self, url: &str) -> Result<StoredResponse, ContentError>;

    /// Like [`ContentManager::inject`], but stores the response as the module variant
    /// `variant` of `url`: the object a later request for `url` finds when a module
    /// sets [`crate::CacheOverrides::variant`] to `variant` at request headers. A module
    /// that answers a request itself (an ad remover's blank image, for example) uses it
    /// to make its answer a cache hit next time.
    ///
    /// Added after the other calls: the default answers
    /// [`ContentError::NotStorable`], so an implementation written before it still
    /// compiles. The engine's implementation stores the response.
    fn inject_variant<'a>(
        &'a self,
        url: &'a str,
        variant: &'a str,
        status: StatusCode,
        headers: HeaderMap,
        body: Box<dyn BodyReader>,
    ) -> ContentFuture<'a, ObjectInfo> {
        let _ = (url, variant, status, headers, body);
        Box::pin(async { Err(ContentError::NotStorable) })
    }

    /// Sends `request` (an absolute `http://` or `https://` URI, headers and body as
    /// given) to its origin through the engine's upstream connections, past the cache
    /// and every module, and returns the whole response, within `timeout`. A body
    /// longer than [`CALL_BODY_LIMIT`] fails the call. For a module that consults
    /// another service on a transaction's way (an authorization server, a lookup):
    /// return [`crate::Flow::Wait`] with the call inside.
    ///
    /// ```no_run
    /// # async fn example(content: &dyn weir_api::ContentManager) {
    /// use std::time::Duration;
    /// let request = http::Request::get("http://auth.internal:8080/check?user=ann")
    ///     .body(bytes::Bytes::new())
    ///     .unwrap();
    /// match content.call(request, Duration::from_secs(2)).await {
    ///     Ok(response) if response.status().is_success() => { /* allowed */ }
    ///     _ => { /* refused, or the service failed */ }
    /// }
    /// # }
    /// ```
    ///
    /// Trailer fields go in [`Trailers`] in the request's extensions: they are sent
    /// after the body (chunked to an HTTP/1.1 service, with a `Trailer` field naming
    /// them unless the request has one). A `GET`, `HEAD` or `CONNECT` call with
    /// trailers fails: such a request goes to an HTTP/1.1 service without a body. The
    /// service's trailers, when it sent any, are in the response's extensions as
    /// [`Trailers`]; an HTTP/1.1 service sends them only to a request with
    /// `TE: trailers`.
    ///
    /// Added after the other calls: the default answers [`ContentError::Origin`], so
    /// an implementation written before it still compiles.
    fn call<'a>(
        &'a self,
        request: http::Request<Bytes>,
        timeout: Duration,
    ) -> ContentFuture<'a, http::Response<Bytes>> {
        let _ = (request, timeout);
        Box::pin(async { Err(ContentError::Origin("calls are not supported here".into())) })
    }
}

/// Trailer fields of a [`ContentManager::call`]: in the request's extensions, what is
/// sent after its body; in the response's, what the service sent after its body.
///
/// ```
/// use weir_api::http::{HeaderMap, HeaderValue, Request};
/// use weir_api::{Bytes, Trailers};
///
/// let mut trailers = HeaderMap::new();
/// trailers.insert("x-checksum", HeaderValue::from_static("abc"));
/// let mut request = Request::post("http://service.internal/upload")
///     .body(Bytes::from_static(b"data"))
///     .unwrap();
/// request.extensions_mut().insert(Trailers(trailers));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trailers(pub HeaderMap);

/// The longest response body [`ContentManager::call`] returns (16 MiB).
pub const CALL_BODY_LIMIT: usize = 16 << 20;

/// A body held in memory, as a [`BodyReader`] (for [`ContentManager::inject`]).
pub struct BytesBody(Option<Bytes>);

impl BytesBody {
    /// A reader giving `bytes` in one chunk.
    pub fn boxed(bytes: impl Into<Bytes>) -> Box<dyn BodyReader> {
        Box::new(BytesBody(Some(bytes.into())))
    }
}

impl BodyReader for BytesBody {
    fn next_chunk(&mut self) -> Pin<Box<dyn Future<Output = Option<Bytes>> + Send + '_>> {
        let next = self.0.take().filter(|b| !b.is_empty());
        Box::pin(async move { next })
    }
}
