//! `transcode`: makes images smaller (JPEG at a lower quality, optionally scaled
//! down; WebP for clients that accept it) in helper processes at the lowest CPU
//! priority, and stores each result, so an image is transcoded once per variant.
//!
//! ```toml
//! [[module]]
//! name = "transcode"
//! quality = 60              # 1..=100, JPEG and WebP
//! max_width = 0             # pixels; a larger image is scaled down (0: no limit)
//! max_height = 0
//! webp = true               # WebP for clients whose Accept names image/webp
//! max_pixels = 16000000     # larger images are never decoded (decompression bombs)
//! helpers = 2               # helper processes (default: one per CPU)
//! nice = 19                 # 0..=19
//! sched_idle = true         # SCHED_IDLE as well, where the system has it
//! queue = 64                # jobs in flight; one more passes its image unchanged
//! job_timeout = "2s"        # a slower job passes its image unchanged
//! restart_backoff = "100ms" # first wait before restarting a dead helper (doubles, up to 1 min)
//! types = ["image/jpeg", "image/png", "image/gif", "image/webp"]
//! ```
//!
//! Event by event:
//! - request headers: a `GET` (not a `Range`) from a client that accepts WebP gets
//!   the cache variant `img=webp`, so WebP and JPEG results are separate objects.
//! - upstream request: a stored result's `W/"tag-tc"` is sent to the origin as `"tag"`.
//! - response headers: a `200` of a listed type, not encoded, not `no-transform`, is
//!   marked for transcoding.
//! - whole response: the image goes to a helper; the transaction waits (other
//!   transactions do not). A smaller result replaces the body, its `Content-Type` and
//!   a weak `ETag`; anything else (queue full, timeout, helper crash, bad or animated
//!   image, too many pixels, not smaller) keeps the original, counted by reason.
//! - deliver headers: `Vary: Accept` on the images it may transcode (hits included).

mod codec;
mod headers;
mod job;
mod settings;

pub use codec::{transcode, Format, Outcome, Params};
pub use settings::{TranscodeSettings, DEFAULT_TYPES};

use std::sync::{Arc, OnceLock};

use weir_api::http::{header, HeaderValue, Method, StatusCode};
use weir_api::{
    Bytes, Counter, Decision, Event, Events, Flow, Module, ModuleContext, ModuleFactory,
    RequestHead, ResponseHead, Settings, SettingsError, Txn, WholeBody,
};
use weir_helper::{ChildOptions, HelperCommand, JobError, Pool, PoolConfig};

use crate::variant;

/// The helper kind, as in `weir helper transcode`.
pub const HELPER_KIND: &str = "transcode";

/// What a helper process runs for each transcoding job.
pub fn helper_handler(job: &[u8]) -> Result<Vec<u8>, String> {
    job::handle(job)
}

/// The variant part of WebP results.
const WEBP_VARIANT: &str = "img=webp";
/// The variant part of originals kept for clients that asked for no transformation
/// (request `Cache-Control: no-transform`, RFC 9111 §5.2.1.6).
const ORIGINAL_VARIANT: &str = "img=orig";
/// `ETag` suffixes of transcoded bodies.
const ETAG_JPEG: &str = "tc";
const ETAG_WEBP: &str = "tcwebp";

/// Builds [`Transcode`] from its settings (see the [module documentation](self)).
pub struct TranscodeFactory;

impl ModuleFactory for TranscodeFactory {
    fn name(&self) -> &'static str {
        "transcode"
    }

    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        let command = HelperCommand::current_exe(["helper", HELPER_KIND])
            .map_err(|e| SettingsError::at("helpers", format!("cannot find this program: {e}")))?;
        Ok(Arc::new(Transcode::new(
            TranscodeSettings::read(settings)?,
            command,
            context,
        )))
    }
}

/// Counters, exported as `weir_module_transcode_<name>_total`.
struct Metrics {
    done: Counter,
    bytes_in: Counter,
    bytes_out: Counter,
    queue_full: Counter,
    timeout: Counter,
    helper_died: Counter,
    bad_image: Counter,
    unsuitable: Counter,
    not_smaller: Counter,
    too_many_pixels: Counter,
    restarts: Counter,
}

impl Metrics {
    fn new(c: &ModuleContext) -> Metrics {
        let kept = |reason: &str, why: &str| {
            c.counter(
                &format!("transcode_kept_{reason}"),
                &format!("images passed through unchanged: {why}"),
            )
        };
        Metrics {
            done: c.counter(
                "transcode_done",
                "images transcoded (once per URL and variant when stored)",
            ),
            bytes_in: c.counter("transcode_bytes_in", "bytes of the images transcoded"),
            bytes_out: c.counter("transcode_bytes_out", "bytes of their results"),
            queue_full: kept("queue_full", "the helper queue was full"),
            timeout: kept("timeout", "the helper did not answer within job_timeout"),
            helper_died: kept("helper_died", "the helper died or none was running"),
            bad_image: kept("bad_image", "not a decodable image"),
            unsuitable: kept(
                "unsuitable",
                "animated, or transparent with no WebP to offer",
            ),
            not_smaller: kept("not_smaller", "the result was not smaller"),
            too_many_pixels: kept("too_many_pixels", "over max_pixels, never decoded"),
            restarts: c.counter(
                "transcode_helper_restarts",
                "transcoding helpers restarted after dying",
            ),
        }
    }
}

/// The transcoder. Its helpers start with its first job, so a module that is only
/// built (by `weir check`, or a reload that is refused) starts none.
pub struct Transcode {
    settings: TranscodeSettings,
    command: HelperCommand,
    pool: OnceLock<Option<Pool>>,
    metrics: Arc<Metrics>,
}

/// What became of a transcoding job.
enum Transcoded {
    /// The transcoded image.
    Done(Format, Vec<u8>),
    /// The original is the answer (not smaller, unsuitable, bad, too many pixels).
    Kept,
    /// No answer this time (queue full, timeout, no helper): the original passes, and
    /// is not stored, so that a later request gets it transcoded.
    Unavailable,
}

impl Transcode {
    /// A transcoder whose helpers run `command`.
    pub fn new(
        settings: TranscodeSettings,
        command: HelperCommand,
        context: &ModuleContext,
    ) -> Transcode {
        Transcode {
            settings,
            command,
            pool: OnceLock::new(),
            metrics: Arc::new(Metrics::new(context)),
        }
    }

    /// The helper pool, started on first use; `None` when it cannot start (logged).
    fn pool(&self) -> Option<&Pool> {
        self.pool
            .get_or_init(|| {
                let restarts = self.metrics.clone();
                let config = PoolConfig {
                    command: self.command.clone(),
                    helpers: self.settings.helpers,
                    child: ChildOptions {
                        priority: self.settings.priority,
                        threads: 1,
                    },
                    queue: self.settings.queue,
                    job_timeout: self.settings.job_timeout,
                    restart_backoff: self.settings.restart_backoff,
                    restart_backoff_max: std::time::Duration::from_secs(60)
                        .max(self.settings.restart_backoff),
                    on_restart: Some(Arc::new(move || restarts.restarts.inc())),
                };
                Pool::start(config)
                    .map_err(|e| tracing::error!("transcode: cannot start helpers: {e}"))
                    .ok()
            })
            .as_ref()
    }

    /// The helpers' process ids (started if they were not).
    #[cfg(test)]
    fn helper_pids(&self) -> Vec<u32> {
        self.pool().map(Pool::pids).unwrap_or_default()
    }

    fn wants_webp(txn: &Txn) -> bool {
        Self::has_variant(txn, WEBP_VARIANT)
    }

    fn has_variant(txn: &Txn, part: &str) -> bool {
        txn.cache_overrides()
            .variant
            .as_deref()
            .is_some_and(|v| variant::has(v, part))
    }

    fn listed(&self, response: &ResponseHead) -> bool {
        headers::media_type(&response.headers).is_some_and(|t| self.settings.types.contains(&t))
    }

    /// Transcodes `image` in a helper; every outcome but `Done` is counted.
    async fn run(&self, image: &[u8], webp: bool) -> Transcoded {
        let params = Params {
            webp,
            ..self.settings.params
        };
        let m = &self.metrics;
        let Some(pool) = self.pool() else {
            m.helper_died.inc();
            return Transcoded::Unavailable;
        };
        let answer = match pool.run(job::encode(&params, image)).await {
            Ok(answer) => job::decode_outcome(answer).map_err(JobError::Failed),
            Err(e) => Err(e),
        };
        let outcome = match answer {
            Ok(outcome) => outcome,
            Err(error) => {
                match error {
                    JobError::QueueFull => m.queue_full.inc(),
                    JobError::Timeout => m.timeout.inc(),
                    JobError::HelperDied | JobError::NoHelper => m.helper_died.inc(),
                    JobError::Failed(message) => {
                        tracing::warn!("transcode: job failed: {message}");
                        m.bad_image.inc();
                        return Transcoded::Kept;
                    }
                }
                return Transcoded::Unavailable;
            }
        };
        match outcome {
            Outcome::Transcoded { format, data } => {
                m.done.inc();
                m.bytes_in.add(image.len() as u64);
                m.bytes_out.add(data.len() as u64);
                return Transcoded::Done(format, data);
            }
            Outcome::NotSmaller => m.not_smaller.inc(),
            Outcome::TooManyPixels => m.too_many_pixels.inc(),
            Outcome::Unsuitable => m.unsuitable.inc(),
            Outcome::BadImage(_) => m.bad_image.inc(),
        }
        Transcoded::Kept
    }
}

/// Puts a transcoded image in place of the original.
fn replace(response: &mut ResponseHead, body: &mut WholeBody, format: Format, data: Vec<u8>) {
    let h = &mut response.headers;
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    h.remove(header::CONTENT_LENGTH);
    h.remove(header::ACCEPT_RANGES);
    if let Some(etag) = h.get(header::ETAG) {
        let suffix = match format {
            Format::Jpeg => ETAG_JPEG,
            Format::Webp => ETAG_WEBP,
        };
        match headers::transcoded_etag(etag, suffix) {
            Some(tag) => h.insert(header::ETAG, tag),
            None => h.remove(header::ETAG),
        };
    }
    body.data = Bytes::from(data);
}

impl Module for Transcode {
    fn name(&self) -> &str {
        "transcode"
    }

    fn events(&self) -> Events {
        Events::of(&[
            Event::RequestHeaders,
            Event::UpstreamRequest,
            Event::WholeResponse,
            Event::DeliverHeaders,
        ])
    }

    fn on_request_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        if headers::no_transform(&request.headers) {
            // The original, stored apart from the transcoded results.
            variant::add(txn, ORIGINAL_VARIANT);
        } else if self.settings.webp
            && request.method == Method::GET
            && !request.headers.contains_key(header::RANGE)
            && headers::accepts_webp(&request.headers)
        {
            variant::add(txn, WEBP_VARIANT);
        }
        Flow::Continue
    }

    fn on_upstream_request<'a>(
        &'a self,
        _txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        let origin = request
            .headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| headers::origin_if_none_match(v, &[ETAG_JPEG, ETAG_WEBP]));
        if let Some(v) = origin {
            request.headers.insert(header::IF_NONE_MATCH, v);
        }
        Flow::Continue
    }

    /// Only images it transcodes are held back whole; everything else streams.
    fn wants_whole_response(&self, txn: &mut Txn, response: &ResponseHead) -> bool {
        let h = &response.headers;
        response.status == StatusCode::OK
            && !Self::has_variant(txn, ORIGINAL_VARIANT)
            && self.listed(response)
            && !h.contains_key(header::CONTENT_ENCODING)
            && !h.contains_key(header::CONTENT_RANGE)
            && !headers::no_transform(h)
    }

    fn on_whole_response<'a>(
        &'a self,
        txn: &'a mut Txn,
        response: &'a mut ResponseHead,
        body: &'a mut WholeBody,
    ) -> Flow<'a> {
        if body.truncated || body.data.is_empty() {
            return Flow::Continue;
        }
        let webp = Self::wants_webp(txn);
        Flow::wait(async move {
            match self.run(&body.data, webp).await {
                Transcoded::Done(format, data) => replace(response, body, format, data),
                Transcoded::Kept => {}
                Transcoded::Unavailable => txn.cache().skip = true,
            }
            Decision::Continue
        })
    }

    fn on_deliver_headers<'a>(
        &'a self,
        _txn: &'a mut Txn,
        response: &'a mut ResponseHead,
    ) -> Flow<'a> {
        if self.settings.webp
            && headers::media_type(&response.headers)
                .is_some_and(|t| t == "image/webp" || self.settings.types.contains(&t))
        {
            headers::merge_vary(&mut response.headers);
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests;
