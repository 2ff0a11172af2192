//! A small etcd v3 client over etcd's JSON gateway (`POST /v3/...`, the gRPC API in
//! JSON, served on the client port by every etcd since 3.4): lease grant and
//! keep-alive, put, range, delete and watch. Keys and values travel in base64, 64-bit
//! numbers as strings. Each call opens its own HTTP/1.1 connection (calls are rare:
//! a renewal every third of a lease, one put per purge), tries the endpoints in turn
//! starting from the last that answered, and is bounded in time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hyper::body::Incoming;
use serde_json::{json, Value};
use tokio_rustls::TlsConnector;

use crate::gateway::{err, send, JsonStream};
pub use crate::gateway::{parse_endpoint, Endpoint, EtcdError};

/// One key-value as a range or a watch returns it.
#[derive(Debug, Clone)]
pub struct Kv {
    /// The key.
    pub key: String,
    /// The value (empty for a deletion).
    pub value: Vec<u8>,
    /// The revision of its last change.
    pub mod_revision: i64,
}

/// One event of a watch.
#[derive(Debug, Clone)]
pub struct Event {
    /// A deletion (or a lease's expiry) rather than a put.
    pub deleted: bool,
    /// What changed.
    pub kv: Kv,
}

/// A user of etcd's authentication (`etcdctl auth enable`). Its `Debug` hides the
/// password.
#[derive(Clone)]
pub struct Credentials {
    /// The user's name.
    pub user: String,
    /// Its password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// The client: endpoints as `http://host:port` or `https://host:port`.
pub struct Etcd {
    endpoints: Vec<Endpoint>,
    /// For `https://` endpoints.
    tls: Option<TlsConnector>,
    /// The endpoint that answered last.
    current: AtomicUsize,
    /// Bound on one unary call.
    timeout: Duration,
    /// Who to authenticate as, when etcd's authentication is on.
    credentials: Option<Credentials>,
    /// The token etcd gave for them; asked for again when etcd no longer takes it
    /// (simple tokens expire after five idle minutes, and with a restart).
    token: Mutex<Option<String>>,
}

/// Encodes a key or value for the gateway.
pub fn b64(data: &[u8]) -> String {
    B64.encode(data)
}

/// The key just after every key that begins with `prefix` (a prefix's range end).
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// A gateway number (a string, or missing when zero).
fn num(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn unb64(v: &Value) -> Vec<u8> {
    v.as_str()
        .and_then(|s| B64.decode(s).ok())
        .unwrap_or_default()
}

fn kv_of(v: &Value) -> Kv {
    Kv {
        key: String::from_utf8_lossy(&unb64(&v["key"])).into_owned(),
        value: unb64(&v["value"]),
        mod_revision: num(&v["mod_revision"]),
    }
}

impl Etcd {
    /// A client of these endpoints (already checked by [`parse_endpoint`]),
    /// authenticating with `credentials` if given.
    /// `tls` is the client configuration for `https://` endpoints (required when there
    /// is one).
    pub fn new(
        endpoints: &[String],
        timeout: Duration,
        credentials: Option<Credentials>,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Result<Etcd, String> {
        let endpoints = endpoints
            .iter()
            .map(|e| parse_endpoint(e))
            .collect::<Result<Vec<_>, _>>()?;
        if endpoints.is_empty() {
            return Err("no etcd endpoint".into());
        }
        if endpoints.iter().any(|e| e.tls) && tls.is_none() {
            return Err("an https:// etcd endpoint needs a TLS configuration".into());
        }
        Ok(Etcd {
            endpoints,
            tls: tls.map(TlsConnector::from),
            current: AtomicUsize::new(0),
            timeout,
            credentials,
            token: Mutex::new(None),
        })
    }

    /// Sends `body` to `path` on the first endpoint that answers, authenticated when
    /// credentials are set (again, once, when etcd refuses the token it gave); the
    /// response's head and body stream.
    async fn open(&self, path: &str, body: &Value) -> Result<Incoming, EtcdError> {
        if self.credentials.is_none() {
            return self.open_as(path, body, None).await;
        }
        let token = self.token().await?;
        match self.open_as(path, body, Some(&token)).await {
            Err(e) if e.0.contains("invalid auth token") || e.0.contains("401") => {
                *self.token.lock().unwrap_or_else(|e| e.into_inner()) = None;
                let token = self.token().await?;
                self.open_as(path, body, Some(&token)).await
            }
            other => other,
        }
    }

    /// The token for the credentials, asked of etcd when there is none.
    async fn token(&self) -> Result<String, EtcdError> {
        if let Some(t) = self.token.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(t);
        }
        let Some(c) = &self.credentials else {
            return Err(err("no etcd credentials"));
        };
        let asked = json!({ "name": c.user, "password": c.password });
        let mut stream =
            JsonStream::new(self.open_as("/v3/auth/authenticate", &asked, None).await?);
        let answer = tokio::time::timeout(self.timeout, stream.next())
            .await
            .map_err(|_| err("etcd authentication timed out"))??
            .unwrap_or_default();
        let Some(token) = answer.get("token").and_then(Value::as_str) else {
            let why = answer
                .get("error")
                .map_or("no token".to_string(), Value::to_string);
            return Err(err(format!("etcd refused the user `{}`: {why}", c.user)));
        };
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = Some(token.to_string());
        Ok(token.to_string())
    }

    async fn open_as(
        &self,
        path: &str,
        body: &Value,
        token: Option<&str>,
    ) -> Result<Incoming, EtcdError> {
        let start = self.current.load(Ordering::Relaxed);
        let mut last = err("no etcd endpoint");
        for i in 0..self.endpoints.len() {
            let at = (start + i) % self.endpoints.len();
            let endpoint = &self.endpoints[at];
            let (host, port) = (&endpoint.host, &endpoint.port);
            let sent = send(endpoint, self.tls.as_ref(), path, body, token);
            match tokio::time::timeout(self.timeout, sent).await {
                Ok(Ok(body)) => {
                    self.current.store(at, Ordering::Relaxed);
                    return Ok(body);
                }
                Ok(Err(e)) => last = e,
                Err(_) => last = err(format!("etcd {host}:{port} did not answer in time")),
            }
        }
        Err(last)
    }

    /// A unary call: the first JSON object of the answer.
    async fn call(&self, path: &str, body: Value) -> Result<Value, EtcdError> {
        let work = async {
            let mut stream = JsonStream::new(self.open(path, &body).await?);
            stream
                .next()
                .await?
                .ok_or_else(|| err(format!("etcd closed {path} without an answer")))
        };
        let v = tokio::time::timeout(self.timeout * 2, work)
            .await
            .map_err(|_| err(format!("etcd {path} timed out")))??;
        if let Some(e) = v.get("error").or_else(|| v.get("message")) {
            return Err(err(format!("etcd {path}: {e}")));
        }
        // Streaming calls (keep-alive) wrap their answer in `result`.
        Ok(v.get("result").cloned().unwrap_or(v))
    }

    /// Grants a lease of `ttl` seconds; its id.
    pub async fn grant(&self, ttl: i64) -> Result<i64, EtcdError> {
        let v = self.call("/v3/lease/grant", json!({ "TTL": ttl })).await?;
        match num(&v["ID"]) {
            0 => Err(err("etcd granted no lease")),
            id => Ok(id),
        }
    }

    /// Renews a lease; false when it has expired.
    pub async fn keep_alive(&self, lease: i64) -> Result<bool, EtcdError> {
        let v = self
            .call("/v3/lease/keepalive", json!({ "ID": lease.to_string() }))
            .await?;
        Ok(num(&v["TTL"]) > 0)
    }

    /// Revokes a lease (its keys go with it).
    pub async fn revoke(&self, lease: i64) -> Result<(), EtcdError> {
        self.call("/v3/lease/revoke", json!({ "ID": lease.to_string() }))
            .await
            .map(|_| ())
    }

    /// Puts `key` = `value`, bound to `lease` (0: none); the revision of the put.
    pub async fn put(&self, key: &str, value: &[u8], lease: i64) -> Result<i64, EtcdError> {
        let mut body = json!({ "key": b64(key.as_bytes()), "value": b64(value) });
        if lease != 0 {
            body["lease"] = json!(lease.to_string());
        }
        let v = self.call("/v3/kv/put", body).await?;
        Ok(num(&v["header"]["revision"]))
    }

    /// Every key under `prefix`, and the store's revision.
    pub async fn range_prefix(&self, prefix: &str) -> Result<(i64, Vec<Kv>), EtcdError> {
        let body = json!({
            "key": b64(prefix.as_bytes()),
            "range_end": b64(&prefix_end(prefix)),
        });
        let v = self.call("/v3/kv/range", body).await?;
        let kvs = v["kvs"].as_array().map(|a| a.iter().map(kv_of).collect());
        Ok((num(&v["header"]["revision"]), kvs.unwrap_or_default()))
    }

    /// Watches every key under `prefix` from revision `start` on.
    pub async fn watch(&self, prefix: &str, start: i64) -> Result<Watch, EtcdError> {
        let body = json!({ "create_request": {
            "key": b64(prefix.as_bytes()),
            "range_end": b64(&prefix_end(prefix)),
            "start_revision": start.to_string(),
            "progress_notify": true,
        }});
        Ok(Watch {
            stream: JsonStream::new(self.open("/v3/watch", &body).await?),
        })
    }
}

/// What one message of a watch says.
#[derive(Debug)]
pub enum WatchMessage {
    /// Events (possibly none: a progress notice), and the store's revision then.
    Events {
        /// The store's revision when sent: every change up to it has been delivered.
        revision: i64,
        /// The changes, in revision order.
        events: Vec<Event>,
    },
    /// The start revision has been compacted away: history before this is gone.
    Compacted(i64),
}

/// A watch stream.
pub struct Watch {
    stream: JsonStream,
}

impl Watch {
    /// The next message; `None` when etcd ended the stream.
    pub async fn next(&mut self) -> Result<Option<WatchMessage>, EtcdError> {
        loop {
            let Some(v) = self.stream.next().await? else {
                return Ok(None);
            };
            if let Some(e) = v.get("error") {
                return Err(err(format!("etcd watch: {e}")));
            }
            let r = v.get("result").unwrap_or(&v);
            let compacted = num(&r["compact_revision"]);
            if compacted > 0 {
                return Ok(Some(WatchMessage::Compacted(compacted)));
            }
            if r["canceled"].as_bool() == Some(true) {
                return Err(err(format!("etcd cancelled the watch: {r}")));
            }
            if r["created"].as_bool() == Some(true) && r.get("events").is_none() {
                continue;
            }
            let events = r["events"].as_array().map(|a| {
                a.iter()
                    .map(|e| Event {
                        deleted: e["type"].as_str() == Some("DELETE") || num(&e["type"]) == 1,
                        kv: kv_of(&e["kv"]),
                    })
                    .collect()
            });
            return Ok(Some(WatchMessage::Events {
                revision: num(&r["header"]["revision"]),
                events: events.unwrap_or_default(),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_and_prefixes() {
        let plain = parse_endpoint("http://127.0.0.1:2379").unwrap();
        assert_eq!(
            (plain.tls, plain.host.as_str(), plain.port),
            (false, "127.0.0.1", 2379)
        );
        let tls = parse_endpoint("https://[::1]:2379/").unwrap();
        assert_eq!((tls.tls, tls.host.as_str(), tls.port), (true, "::1", 2379));
        assert!(parse_endpoint("h:1").is_err());
        assert!(parse_endpoint("http://h").is_err());
        assert!(parse_endpoint("http://h:1/x").is_err());
        assert_eq!(prefix_end("/weir/"), b"/weir0".to_vec());
    }
}
