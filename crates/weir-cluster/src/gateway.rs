//! etcd's JSON gateway as the client reaches it: endpoints, one POST on a connection
//! of its own (plain or TLS), and the stream of JSON objects an answer carries. The
//! bottom of the etcd client (`etcd.rs` above it).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// What went wrong talking to etcd.
#[derive(Debug, Clone)]
pub struct EtcdError(pub String);

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EtcdError {}

pub(crate) fn err(message: impl Into<String>) -> EtcdError {
    EtcdError(message.into())
}

/// One of etcd's client endpoints.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `https://`: TLS.
    pub tls: bool,
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
}

/// Parses `http://host:port` or `https://host:port`.
pub fn parse_endpoint(url: &str) -> Result<Endpoint, String> {
    let (tls, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => {
            return Err(format!(
                "`{url}` is not an etcd endpoint: http://host:port or https://host:port"
            ))
        }
    };
    let rest = rest.trim_end_matches('/');
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("`{url}` has no port (etcd's client port is usually 2379)"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("`{url}` has no valid port"))?;
    if host.is_empty() || rest.contains('/') {
        return Err(format!(
            "`{url}` is not an etcd endpoint: http://host:port or https://host:port"
        ));
    }
    Ok(Endpoint {
        tls,
        host: host.trim_matches(['[', ']']).to_string(),
        port,
    })
}

/// HTTP/1.1 on `io`, its connection driven by a task of its own.
async fn handshake<I>(io: I) -> Result<SendRequest<Full<Bytes>>, hyper::Error>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Sends one POST on a connection of its own; the answer's body (an error status is
/// an error, with the start of the body).
pub(crate) async fn send(
    endpoint: &Endpoint,
    tls: Option<&TlsConnector>,
    path: &str,
    body: &Value,
    token: Option<&str>,
) -> Result<Incoming, EtcdError> {
    let (host, port) = (endpoint.host.as_str(), endpoint.port);
    let failed = |e: &dyn std::fmt::Display| err(format!("etcd {host}:{port}: {e}"));
    let stream = TcpStream::connect((host, port))
        .await
        .map_err(|e| failed(&e))?;
    let _ = stream.set_nodelay(true);
    let mut sender = match (endpoint.tls, tls) {
        (true, Some(tls)) => {
            let name =
                rustls_pki_types::ServerName::try_from(host.to_string()).map_err(|e| failed(&e))?;
            let stream = tls.connect(name, stream).await.map_err(|e| failed(&e))?;
            handshake(stream).await
        }
        _ => handshake(stream).await,
    }
    .map_err(|e| failed(&e))?;
    let mut request = http::Request::post(path)
        .header(http::header::HOST, format!("{host}:{port}"))
        .header(http::header::CONTENT_TYPE, "application/json");
    // etcd's gateway takes the token as it is, without a scheme.
    if let Some(token) = token {
        request = request.header(http::header::AUTHORIZATION, token);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| err(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| err(format!("etcd {host}:{port}: {e}")))?;
    let status = response.status();
    let body = response.into_body();
    if !status.is_success() {
        let text = tokio::time::timeout(Duration::from_secs(2), body.collect())
            .await
            .ok()
            .and_then(|b| b.ok())
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
            .unwrap_or_default();
        let text: String = text.chars().take(200).collect();
        return Err(err(format!("etcd {host}:{port} {path}: {status} {text}")));
    }
    Ok(body)
}

/// JSON objects, one after another, from a streaming body (the gateway writes one a
/// line).
pub(crate) struct JsonStream {
    body: Incoming,
    buffer: BytesMut,
}

impl JsonStream {
    pub(crate) fn new(body: Incoming) -> JsonStream {
        JsonStream {
            body,
            buffer: BytesMut::new(),
        }
    }

    pub(crate) async fn next(&mut self) -> Result<Option<Value>, EtcdError> {
        loop {
            if let Some(v) = self.take()? {
                return Ok(Some(v));
            }
            match self.body.frame().await {
                None => {
                    let rest = std::mem::take(&mut self.buffer);
                    let rest = String::from_utf8_lossy(&rest);
                    if rest.trim().is_empty() {
                        return Ok(None);
                    }
                    return serde_json::from_str(rest.trim())
                        .map(Some)
                        .map_err(|e| err(format!("etcd sent bad JSON: {e}")));
                }
                Some(Err(e)) => return Err(err(format!("etcd stream: {e}"))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }

    /// One complete object from the buffer, if there is one.
    fn take(&mut self) -> Result<Option<Value>, EtcdError> {
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
            let line = self.buffer.split_to(end + 1);
            let text = String::from_utf8_lossy(&line);
            if text.trim().is_empty() {
                continue;
            }
            return serde_json::from_str(text.trim())
                .map(Some)
                .map_err(|e| err(format!("etcd sent bad JSON: {e}")));
        }
        Ok(None)
    }
}
