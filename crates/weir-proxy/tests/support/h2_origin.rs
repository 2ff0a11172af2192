//! `H2Origin`: an origin that speaks HTTP/1.1 and HTTP/2, in clear text (h2c with
//! prior knowledge) or over TLS (rustls, ALPN), with certificates made at start by
//! `rcgen`. It records the HTTP version of every request and counts its connections.
//!
//! Paths: `/slow/*` answers after [`SLOW`]; `/reset` fails the request (hyper resets
//! the HTTP/2 stream); `/goaway` answers and then shuts its connection down gracefully
//! (GOAWAY); `/cached/*` answers with `max-age=60`; any other path answers at once,
//! uncacheable. Every answer carries `x-origin-version`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// How long `/slow/*` takes.
pub const SLOW: Duration = Duration::from_millis(300);

/// A CA and certificates it issued, written as PEM files for `ca_file`.
pub struct TestPki {
    dir: PathBuf,
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_pem: String,
}

/// A certificate and its key.
#[derive(Clone)]
pub struct Leaf {
    cert: CertificateDer<'static>,
    key: Vec<u8>,
}

impl TestPki {
    /// A new CA; its certificate is written to `<dir>/ca.pem`.
    pub fn new(name: &str) -> TestPki {
        let dir = std::env::temp_dir().join(format!(
            "weir-pki-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("weir test CA {name}"));
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let cert = params.self_signed(&key).unwrap();
        let ca_pem = cert.pem();
        std::fs::write(dir.join("ca.pem"), &ca_pem).unwrap();
        TestPki {
            dir,
            ca: rcgen::Issuer::new(params, key),
            ca_pem,
        }
    }

    /// The CA certificate's PEM file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A server certificate for `names` (DNS names or IP addresses).
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let params = rcgen::CertificateParams::new(names).unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        Leaf {
            cert: cert.der().clone(),
            key: key.serialize_der(),
        }
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = &self.ca_pem;
    }
}

/// How the origin is reached.
pub enum Transport {
    /// HTTP/1.1 and h2c (prior knowledge) on one port.
    Clear,
    /// TLS with this certificate, offering these ALPN protocols.
    Tls { leaf: Leaf, alpn: Vec<&'static str> },
}

#[derive(Default)]
struct State {
    versions: Mutex<Vec<(String, http::Version)>>,
    connections: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// The origin; stops when dropped.
pub struct H2Origin {
    addr: SocketAddr,
    tls: bool,
    state: Arc<State>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl H2Origin {
    /// Starts on 127.0.0.1, on an ephemeral port, with its own thread and runtime.
    /// `max_streams` is its HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub fn start(transport: Transport, max_streams: u32) -> H2Origin {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = match &transport {
            Transport::Clear => None,
            Transport::Tls { leaf, alpn } => {
                let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key.clone()));
                let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![leaf.cert.clone()], key)
                .unwrap();
                config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
                Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
            }
        };
        let tls = acceptor.is_some();
        let state = Arc::new(State::default());
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    tokio::select! {
                        _ = &mut stop_rx => break,
                        accepted = listener.accept() => {
                            let Ok((tcp, _)) = accepted else { continue };
                            st.connections.fetch_add(1, Ordering::SeqCst);
                            let (st, acceptor) = (st.clone(), acceptor.clone());
                            tokio::spawn(async move {
                                match acceptor {
                                    None => serve(st, tcp, max_streams).await,
                                    Some(a) => {
                                        if let Ok(s) = a.accept(tcp).await {
                                            serve(st, s, max_streams).await;
                                        }
                                    }
                                }
                            });
                        }
                    }
                }
            });
            rt.shutdown_timeout(Duration::from_millis(200));
        });
        H2Origin {
            addr,
            tls,
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.state.versions.lock().unwrap().len()
    }

    /// The HTTP version of the last request for `path`.
    pub fn version_of(&self, path: &str) -> Option<http::Version> {
        let v = self.state.versions.lock().unwrap();
        v.iter().rev().find(|(p, _)| p == path).map(|(_, v)| *v)
    }

    /// The most requests it was handling at once.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }
}

impl Drop for H2Origin {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve<S>(state: Arc<State>, stream: S, max_streams: u32)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let goaway = Arc::new(tokio::sync::Notify::new());
    let trigger = goaway.clone();
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let (state, trigger) = (state.clone(), trigger.clone());
        async move { answer(state, trigger, req).await }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http2().max_concurrent_streams(max_streams);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = goaway.notified() => conn.as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}

async fn answer(
    state: Arc<State>,
    goaway: Arc<tokio::sync::Notify>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let path = req.uri().path().to_string();
    let version = req.version();
    state.versions.lock().unwrap().push((path.clone(), version));
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    if path.starts_with("/slow/") {
        tokio::time::sleep(SLOW).await;
    }
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    if path == "/reset" {
        return Err(std::io::Error::other("reset on purpose"));
    }
    if path == "/goaway" {
        // After this answer is on its way: the connection then sends GOAWAY.
        let later = goaway.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            later.notify_one();
        });
    }
    let cache_control = if path.starts_with("/cached/") {
        "max-age=60"
    } else {
        "no-store"
    };
    let mut resp = Response::new(Full::new(Bytes::from(format!("{path} {version:?}"))));
    let h = resp.headers_mut();
    h.insert("cache-control", cache_control.parse().unwrap());
    h.insert("x-origin-version", format!("{version:?}").parse().unwrap());
    Ok(resp)
}
