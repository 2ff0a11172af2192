//! One ICAP service: its OPTIONS (asked at start, again when their TTL runs out or
//! the ISTag changes), its connections, and one REQMOD or RESPMOD exchange with
//! preview, `100 Continue` and `204`.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use weir_api::ModuleContext;

use super::failure::Failure;
use super::metrics::Metrics;
use super::options::{ServiceOptions, Transfer};
use super::pool::Pool;
use super::reader::{Answer, Limits};
use super::settings::ServiceConfig;
use super::transport::{self, AfterContinue};
use super::wire::{encode_chunk, encode_request, HttpHead, Outgoing, LAST_CHUNK, LAST_CHUNK_IEOF};

/// The ICAP head and the encapsulated HTTP heads of an answer together.
const MAX_HEAD: usize = 64 * 1024;

/// A message to adapt.
pub struct Message<'a> {
    /// The encapsulated HTTP request head (REQMOD always; RESPMOD when known).
    pub request: Option<Vec<u8>>,
    /// The encapsulated HTTP response head (RESPMOD).
    pub response: Option<Vec<u8>>,
    /// The body, or its beginning when `truncated`.
    pub body: &'a [u8],
    /// The body is longer than `body`.
    pub truncated: bool,
    /// The URL path, whose extension picks the `Transfer-*` list.
    pub path: &'a str,
}

/// What the service made of a message.
#[derive(Debug)]
pub enum Outcome {
    /// The service does not take this message (its OPTIONS do not list the method,
    /// or `Transfer-Ignore` names the extension).
    Skipped,
    /// `204`: use the message as it is. `istag` is the answer's ISTag.
    Unmodified { istag: Option<String> },
    /// `200`: the adapted message (or, to a REQMOD, a response), and its body.
    Modified {
        heads: Vec<HttpHead>,
        body: Option<Vec<u8>>,
        istag: Option<String>,
    },
    /// The body was truncated and the service wants more of it than the module has.
    WantsMore,
}

/// One configured service.
pub struct Service {
    /// Its settings.
    pub config: ServiceConfig,
    pool: Pool,
    options: RwLock<Option<Arc<ServiceOptions>>>,
    refresh: tokio::sync::Mutex<()>,
    rest_until: Mutex<Option<Instant>>,
    metrics: Metrics,
    context: ModuleContext,
}

impl Service {
    /// A service with no connection and no OPTIONS yet.
    pub fn new(config: ServiceConfig, metrics: Metrics, context: ModuleContext) -> Service {
        let pool = Pool::new(
            config.authority.clone(),
            config.max_connections,
            config.connect_timeout,
        );
        Service {
            config,
            pool,
            options: RwLock::new(None),
            refresh: tokio::sync::Mutex::new(()),
            rest_until: Mutex::new(None),
            metrics,
            context,
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            head: MAX_HEAD,
            body: self.config.max_answer,
        }
    }

    /// Writes `first` on one of the service's connections and reads the answer (see
    /// [`transport::send`]).
    async fn send(
        &self,
        first: &[u8],
        after_continue: AfterContinue<'_>,
    ) -> Result<Answer, Failure> {
        transport::send(&self.pool, self.limits(), first, after_continue).await
    }

    fn cached_options(&self) -> Option<Arc<ServiceOptions>> {
        let guard = self.options.read().unwrap_or_else(|p| p.into_inner());
        guard.clone().filter(|o| o.expires > Instant::now())
    }

    /// The service's OPTIONS, asked for when there are none yet or they expired. One
    /// OPTIONS request at a time: the others wait for its answer.
    pub async fn options(&self) -> Result<Arc<ServiceOptions>, Failure> {
        if let Some(o) = self.cached_options() {
            return Ok(o);
        }
        let _single = self.refresh.lock().await;
        if let Some(o) = self.cached_options() {
            return Ok(o);
        }
        self.metrics.options.inc();
        let out = Outgoing {
            method: "OPTIONS",
            url: &self.config.url,
            host: &self.config.authority,
            preview: None,
            request: None,
            response: None,
            body: false,
        };
        let head = encode_request(&out);
        let answer = self.send(&head, AfterContinue::Error).await?;
        if answer.status != 200 {
            return Err(Failure::Status(answer.status));
        }
        let options = Arc::new(ServiceOptions::from_headers(
            &answer.headers,
            Instant::now(),
        ));
        self.pool.limit_to(options.max_connections);
        *self.options.write().unwrap_or_else(|p| p.into_inner()) = Some(options.clone());
        Ok(options)
    }

    /// Asks for the OPTIONS when the module is loaded. This runs on the proxy's main
    /// thread, so its connection is closed rather than kept: the pool keeps only
    /// connections made where transactions run.
    pub async fn warm_up(&self) {
        let _ = tokio::time::timeout(self.config.timeout, self.options()).await;
        self.pool.close_idle();
    }

    /// Sends `message` to the service and reads its final answer, all within the
    /// service's timeout.
    /// A service that could not be reached or timed out is not tried again for
    /// `retry_after`: a dead or hung service would otherwise cost every message its
    /// timeout.
    pub async fn adapt(&self, message: &Message<'_>) -> Result<Outcome, Failure> {
        if self.resting() {
            return Err(Failure::Resting);
        }
        let result = tokio::time::timeout(self.config.timeout, self.exchange(message))
            .await
            .unwrap_or(Err(Failure::Timeout));
        if matches!(result, Err(Failure::Connect | Failure::Timeout))
            && !self.config.retry_after.is_zero()
        {
            let until = Instant::now() + self.config.retry_after;
            *self.rest_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(until);
        }
        result
    }

    fn resting(&self) -> bool {
        let until = *self.rest_until.lock().unwrap_or_else(|p| p.into_inner());
        until.is_some_and(|t| Instant::now() < t)
    }

    async fn exchange(&self, message: &Message<'_>) -> Result<Outcome, Failure> {
        let options = self.options().await?;
        if !options.methods.contains(&self.config.method) {
            return Ok(Outcome::Skipped);
        }
        let has_body = !message.body.is_empty() || message.truncated;
        let transfer = if has_body {
            options.transfer(message.path, self.config.preview)
        } else {
            Transfer::Complete
        };
        let preview = match transfer {
            Transfer::Ignore => return Ok(Outcome::Skipped),
            Transfer::Preview(n) => Some(n),
            // All of a truncated body cannot be sent.
            Transfer::Complete if message.truncated => return Ok(Outcome::WantsMore),
            Transfer::Complete => None,
        };
        if message.truncated && preview.is_some_and(|n| n > message.body.len()) {
            return Ok(Outcome::WantsMore);
        }
        // The Preview header says how many bytes the preview holds (RFC 3507, 4.5).
        let preview = preview.map(|n| n.min(message.body.len()));
        let out = Outgoing {
            method: self.config.method.as_str(),
            url: &self.config.url,
            host: &self.config.authority,
            preview,
            request: message.request.clone(),
            response: message.response.clone(),
            body: has_body,
        };
        let mut first = encode_request(&out);
        let mut rest = Vec::new();
        match preview {
            Some(n) if has_body => {
                encode_chunk(&mut first, &message.body[..n]);
                let whole = n == message.body.len() && !message.truncated;
                first.extend_from_slice(if whole { LAST_CHUNK_IEOF } else { LAST_CHUNK });
                if !whole {
                    encode_chunk(&mut rest, &message.body[n..]);
                    rest.extend_from_slice(LAST_CHUNK);
                }
            }
            _ if has_body => {
                encode_chunk(&mut first, message.body);
                first.extend_from_slice(LAST_CHUNK);
            }
            _ => {}
        }
        self.metrics.requests.inc();
        let after_continue = if message.truncated {
            // After a preview of a truncated body there is nothing more to send.
            AfterContinue::Stop
        } else if rest.is_empty() {
            AfterContinue::Error
        } else {
            AfterContinue::Send(&rest)
        };
        let answer = self.send(&first, after_continue).await?;
        let istag = answer
            .headers
            .get("istag")
            .and_then(|v| v.to_str().ok())
            .map(|t| t.trim().to_owned());
        self.check_istag(&options, istag.as_deref());
        match answer.status {
            100 => Ok(Outcome::WantsMore),
            204 => Ok(Outcome::Unmodified { istag }),
            200 => Ok(Outcome::Modified {
                heads: answer.heads,
                body: answer.body,
                istag,
            }),
            other => Err(Failure::Status(other)),
        }
    }

    /// A changed ISTag means the service changed (RFC 3507, 4.7): its OPTIONS are
    /// asked again, and the responses the cache stored after the old service adapted
    /// them are removed.
    /// Exchanges that overlap the change all see it: only the first one, which still
    /// finds the options it started with, acts on it.
    fn check_istag(&self, options: &Arc<ServiceOptions>, tag: Option<&str>) {
        let (Some(tag), Some(known)) = (tag, options.istag.as_deref()) else {
            return;
        };
        if tag == known {
            return;
        }
        {
            let mut current = self.options.write().unwrap_or_else(|p| p.into_inner());
            if !current.as_ref().is_some_and(|c| Arc::ptr_eq(c, options)) {
                return;
            }
            *current = None;
        }
        self.metrics.istag_changes.inc();
        let _ = self.context.content().ban_tag(&self.cache_tag(known));
    }

    /// The cache tag of responses this service adapted (or passed with a `204`)
    /// under `istag`.
    pub fn cache_tag(&self, istag: &str) -> String {
        format!("icap:{}#{}", self.config.url, istag.trim_matches('"'))
    }
}
