//! `compress`: compresses text-like responses with gzip, brotli or zstd, as the
//! client's `Accept-Encoding` prefers, and stores each encoding as an object of its
//! own, so that it is computed once per URL and encoding and then served as a hit.
//!
//! ```toml
//! [[module]]
//! name = "compress"
//! encodings = ["br", "zstd", "gzip"]   # offered, in our order of preference
//! types = ["text/*", "application/json", "application/javascript", "application/xml",
//!          "image/svg+xml", "*/*+xml", "*/*+json"]
//! min_size = 256                       # bytes; smaller known-length bodies pass as they are
//! gzip_level = 6                       # 1..=9
//! brotli_level = 2                     # 0..=11
//! zstd_level = 3                       # 1..=22
//! ```
//!
//! How it works, event by event:
//! - request headers: negotiates the encoding and adds it to the cache variant
//!   (`ae=gzip`), so each encoding has its own key. Clients whose headers choose the
//!   same encoding share it; a client without `Accept-Encoding` gets the identity
//!   object. A `Range` request is left alone: the engine answers it from a fresh
//!   identity copy or sends it to the origin, and its answer must not be relabelled.
//! - upstream request: when a stored compressed copy is revalidated, its
//!   `W/"tag-gzip"` is sent to the origin as `W/"tag"`, which the origin knows.
//! - response headers (before the cache stores it): a `200` of a listed type, not
//!   already encoded, not `no-transform`, not known to be under `min_size`, gets
//!   `Content-Encoding`, a weak per-encoding `ETag` and loses `Accept-Ranges`; the
//!   engine drops `Content-Length` (the module declares the length may change).
//! - response body: compressed as it streams.
//! - deliver headers: `Vary: Accept-Encoding` on every response that varies by it.
//!   Added at delivery, not stored: the variant already separates the encodings in
//!   Weir's cache, and a stored `Vary` would split each one by the exact header text.

mod encoder;
mod headers;
mod negotiate;

pub use encoder::{Encoder, Levels};
pub use headers::DEFAULT_TYPES;
pub use negotiate::{negotiate, Encoding};

use std::sync::Arc;

use weir_api::http::{header, HeaderValue, Method, StatusCode};
use weir_api::serde::Deserialize;
use weir_api::{
    BodyChunk, Bytes, Counter, Event, Events, Flow, Module, ModuleContext, ModuleFactory,
    RequestHead, ResponseHead, Settings, SettingsError, Txn,
};

use crate::variant;
use headers::Types;

/// The variant prefix of an encoding (`ae=gzip`).
const PREFIX: &str = "ae=";

/// Builds [`Compress`] from its settings (see the [module documentation](self)).
pub struct CompressFactory;

#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", deny_unknown_fields)]
struct CompressSettings {
    #[serde(default = "default_encodings")]
    encodings: Vec<Encoding>,
    #[serde(default)]
    types: Option<Vec<String>>,
    #[serde(default = "default_min_size")]
    min_size: u64,
    #[serde(default)]
    gzip_level: Option<u32>,
    #[serde(default)]
    brotli_level: Option<u32>,
    #[serde(default)]
    zstd_level: Option<i32>,
}

fn default_encodings() -> Vec<Encoding> {
    vec![Encoding::Brotli, Encoding::Zstd, Encoding::Gzip]
}

fn default_min_size() -> u64 {
    256
}

impl ModuleFactory for CompressFactory {
    fn name(&self) -> &'static str {
        "compress"
    }

    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        Ok(Arc::new(Compress::from_settings(settings, context)?))
    }
}

/// Compresses responses; immutable once built.
pub struct Compress {
    encodings: Vec<Encoding>,
    types: Types,
    min_size: u64,
    levels: Levels,
    compressed: Counter,
    bytes_in: Counter,
    bytes_out: Counter,
}

/// One transaction's compression: set at request headers for a HEAD (no body to
/// compress), at response headers for a body being compressed.
#[derive(Default)]
struct State {
    head: bool,
    encoder: Option<Encoder>,
    bytes_in: u64,
    bytes_out: u64,
}

fn level<T: PartialOrd + Copy + std::fmt::Display>(
    key: &str,
    value: Option<T>,
    default: T,
    (min, max): (T, T),
) -> Result<T, SettingsError> {
    let v = value.unwrap_or(default);
    if v < min || v > max {
        return Err(SettingsError::at(key, format!("must be {min} to {max}")));
    }
    Ok(v)
}

impl Compress {
    /// Checks the settings and builds the module (what the factory does).
    pub fn from_settings(
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Compress, SettingsError> {
        let s: CompressSettings = settings.get()?;
        if s.encodings.is_empty() {
            return Err(SettingsError::at(
                "encodings",
                "offer at least one encoding",
            ));
        }
        let defaults = Levels::default();
        let levels = Levels {
            gzip: level("gzip_level", s.gzip_level, defaults.gzip, (1, 9))?,
            brotli: level("brotli_level", s.brotli_level, defaults.brotli, (0, 11))?,
            zstd: level("zstd_level", s.zstd_level, defaults.zstd, (1, 22))?,
        };
        let patterns = s
            .types
            .unwrap_or_else(|| DEFAULT_TYPES.iter().map(|t| t.to_string()).collect());
        let types = Types::new(&patterns)
            .map_err(|(i, message)| SettingsError::at(format!("types[{i}]"), message))?;
        Ok(Compress {
            encodings: s.encodings,
            types,
            min_size: s.min_size,
            levels,
            compressed: context.counter(
                "compress_compressed",
                "responses the compressor compressed (once per URL and encoding when stored)",
            ),
            bytes_in: context.counter("compress_bytes_in", "bytes the compressor read"),
            bytes_out: context.counter("compress_bytes_out", "bytes the compressor produced"),
        })
    }

    /// The encoding this transaction's variant asks for.
    fn encoding(txn: &Txn) -> Option<Encoding> {
        let v = txn.cache_overrides().variant.as_deref()?;
        Encoding::from_token(variant::find(v, PREFIX)?)
    }

    /// Whether a response with this head would be compressed for a client that
    /// accepts an encoding (before its length is known).
    fn compressible(&self, response: &ResponseHead) -> bool {
        response.status == StatusCode::OK
            && !headers::no_transform(&response.headers)
            && self.types.matches(&response.headers)
    }
}

impl Module for Compress {
    fn name(&self) -> &str {
        "compress"
    }

    fn events(&self) -> Events {
        Events::of(&[
            Event::RequestHeaders,
            Event::UpstreamRequest,
            Event::ResponseHeaders,
            Event::ResponseBody,
            Event::DeliverHeaders,
        ])
    }

    fn on_request_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        let head = request.method == Method::HEAD;
        // A client that asks for no transformation (request `Cache-Control:
        // no-transform`, RFC 9111 §5.2.1.6) gets the identity object.
        if !(head || request.method == Method::GET)
            || request.headers.contains_key(header::RANGE)
            || crate::fields::no_transform(&request.headers)
        {
            return Flow::Continue;
        }
        if let Some(encoding) = negotiate(&request.headers, &self.encodings) {
            variant::add(txn, encoding.variant());
            if head {
                txn.state::<State>().head = true;
            }
        }
        Flow::Continue
    }

    fn on_upstream_request<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        if let Some(encoding) = Self::encoding(txn) {
            let origin = request
                .headers
                .get(header::IF_NONE_MATCH)
                .and_then(|v| headers::origin_if_none_match(v, encoding.token()));
            if let Some(v) = origin {
                request.headers.insert(header::IF_NONE_MATCH, v);
            }
        }
        Flow::Continue
    }

    fn on_response_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        let Some(encoding) = Self::encoding(txn) else {
            return Flow::Continue;
        };
        let h = &response.headers;
        let length = h
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if !self.compressible(response)
            || headers::is_encoded(h)
            || h.contains_key(header::CONTENT_RANGE)
            || length.is_some_and(|n| n < self.min_size)
        {
            return Flow::Continue;
        }
        let h = &mut response.headers;
        h.insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_static(encoding.token()),
        );
        if let Some(etag) = h.get(header::ETAG) {
            match headers::encoded_etag(etag, encoding.token()) {
                Some(tag) => h.insert(header::ETAG, tag),
                // Not a valid entity tag: no tag beats a wrong one.
                None => h.remove(header::ETAG),
            };
        }
        // Byte ranges of the compressed bytes are not offered (a Range request is
        // answered with ranges of the identity, from the cache or the origin).
        h.remove(header::ACCEPT_RANGES);
        txn.body_length_may_change();
        self.compressed.inc();
        let state = txn.state::<State>();
        if !state.head {
            state.encoder = Some(Encoder::new(encoding, &self.levels, length));
        }
        Flow::Continue
    }

    fn on_response_body<'a>(&'a self, txn: &'a mut Txn, chunk: &'a mut BodyChunk) -> Flow<'a> {
        if Self::encoding(txn).is_none() {
            return Flow::Continue;
        }
        let state = txn.state::<State>();
        let Some(encoder) = state.encoder.as_mut() else {
            return Flow::Continue;
        };
        state.bytes_in += chunk.data.len() as u64;
        let mut out = encoder.write(&chunk.data);
        if chunk.last {
            if let Some(encoder) = state.encoder.take() {
                out.extend(encoder.finish());
            }
        }
        state.bytes_out += out.len() as u64;
        if chunk.last {
            self.bytes_in.add(state.bytes_in);
            self.bytes_out.add(state.bytes_out);
        }
        chunk.data = Bytes::from(out);
        Flow::Continue
    }

    fn on_deliver_headers<'a>(
        &'a self,
        _txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        let ours = response
            .headers
            .get(header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| self.encodings.iter().any(|e| e.token() == v));
        // A body this module encoded was found compressible when it was stored: only
        // an identity body needs the type and directive checks again (on every hit).
        if ours || (!headers::is_encoded(&response.headers) && self.compressible(response)) {
            headers::merge_vary(&mut response.headers);
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests;
