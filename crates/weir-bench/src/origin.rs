//! A loopback origin that answers every request after a fixed delay, over HTTP/1.1 and
//! HTTP/2 (h2c with prior knowledge, or TLS with ALPN), and counts its connections.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

/// The running origin; stops with its runtime.
pub struct DelayOrigin {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
}

impl DelayOrigin {
    /// Starts on 127.0.0.1 (ephemeral port) on the current runtime. With `tls_dir`, it
    /// serves TLS with a certificate for 127.0.0.1 issued by a new CA, whose
    /// certificate it writes to `tls_dir/ca.pem`.
    pub async fn start(delay: Duration, tls_dir: Option<&Path>) -> Result<DelayOrigin, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("origin: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let acceptor = match tls_dir {
            Some(dir) => Some(tls_acceptor(dir)?),
            None => None,
        };
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                count.fetch_add(1, Ordering::Relaxed);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match acceptor {
                        None => serve(tcp, delay).await,
                        Some(a) => {
                            if let Ok(s) = a.accept(tcp).await {
                                serve(s, delay).await;
                            }
                        }
                    }
                });
            }
        });
        Ok(DelayOrigin { addr, connections })
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }
}

async fn serve<S>(stream: S, delay: Duration)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service =
        hyper::service::service_fn(move |_req: Request<hyper::body::Incoming>| async move {
            tokio::time::sleep(delay).await;
            let mut resp = Response::new(Full::new(Bytes::from_static(b"ok\n")));
            // Every request is a miss: nothing is stored.
            resp.headers_mut()
                .insert("cache-control", http::HeaderValue::from_static("no-store"));
            Ok::<_, std::convert::Infallible>(resp)
        });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // More streams than the burst, so that the origin is never what limits HTTP/2.
    builder.http2().max_concurrent_streams(4096);
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

fn tls_acceptor(dir: &Path) -> Result<tokio_rustls::TlsAcceptor, String> {
    let e = |e: rcgen::Error| e.to_string();
    let ca_key = rcgen::KeyPair::generate().map_err(e)?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).map_err(e)?;
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).map_err(|e| e.to_string())?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().map_err(e)?;
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .map_err(e)?
        .signed_by(&key, &issuer)
        .map_err(e)?;
    let key_der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], key_der)
    .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
