//! CONNECT tunnels (forward mode): TCP to an allowed port, bytes copied both ways.

use std::sync::Arc;

use http::{HeaderValue, Request, Response, StatusCode};
use tokio::net::TcpStream;

use crate::body::ClientStream;
use crate::conn::ConnInfo;
use crate::engine::Engine;
use crate::error::ProxyError;
use crate::metrics::{CacheOutcome, ErrorKind};
use crate::served::Served;
use crate::upstream::OriginAddr;

pub(crate) async fn connect(
    engine: &Arc<Engine>,
    conn: &ConnInfo,
    req: Request<ClientStream>,
) -> Result<Served, ProxyError> {
    let Some(authority) = req.uri().authority() else {
        return Err(ProxyError::bad_request("CONNECT needs a host:port target"));
    };
    let Some(port) = authority.port_u16() else {
        return Err(ProxyError::bad_request("CONNECT needs a host:port target"));
    };
    if !conn.listener.connect_ports.contains(&port) {
        return Err(ProxyError::forbidden(format!(
            "CONNECT to port {port} is not allowed"
        )));
    }
    let target = OriginAddr::http(
        authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']'),
        port,
    );
    let connect = tokio::net::lookup_host((target.host.as_str(), port));
    let stream = match tokio::time::timeout(engine.upstream_connect_timeout(), async {
        let mut last = None;
        for addr in connect.await? {
            match TcpStream::connect(addr).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no address")))
    })
    .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return Err(ProxyError::bad_gateway(format!(
                "cannot connect to {target}: {e}"
            )))
        }
        Err(_) => {
            return Err(ProxyError::new(
                StatusCode::GATEWAY_TIMEOUT,
                ErrorKind::OriginTimeout,
                format!("connecting to {target} timed out"),
            ))
        }
    };
    let _ = stream.set_nodelay(true);
    let body = crate::relay::join(engine, req, stream, "a CONNECT tunnel");
    Ok(Served {
        response: Response::new(body),
        outcome: CacheOutcome::Tunnel,
        cache_status: HeaderValue::from_static("weir; fwd=bypass; detail=tunnel"),
        upstream: Some(target),
        origin_body: false,
    })
}
