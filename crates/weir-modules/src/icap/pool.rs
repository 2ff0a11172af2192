//! Persistent connections to one ICAP server: idle ones are kept for reuse, and at
//! most a fixed number are open at once (the smaller of the setting and the
//! server's `Max-Connections`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// An idle connection unused for longer than this is closed rather than reused:
/// servers close idle connections themselves (c-icap after its `KeepAliveTimeout`).
const IDLE_LIMIT: Duration = Duration::from_secs(30);

/// The connections to one server.
pub struct Pool {
    addr: String,
    connect_timeout: Duration,
    permits: Arc<Semaphore>,
    configured: usize,
    /// Permits taken out of the semaphore to honour a lower `Max-Connections`.
    withheld: Mutex<usize>,
    idle: Mutex<Vec<(TcpStream, Instant)>>,
}

/// A connection taken from the pool; [`Pool::put_back`] returns it for reuse,
/// dropping it closes it. Either way its slot is freed.
pub struct Conn {
    /// The socket.
    pub stream: TcpStream,
    /// Whether it had served an earlier exchange (so the server may have closed it
    /// in the meantime).
    pub reused: bool,
    _permit: OwnedSemaphorePermit,
}

/// Taking a connection failed.
#[derive(Debug)]
pub enum ConnectError {
    /// Connecting took longer than the connect timeout.
    Timeout,
    /// The server refused or could not be reached.
    Failed,
}

impl Pool {
    /// A pool for `addr` (`host:port`) of at most `max` connections.
    pub fn new(addr: String, max: usize, connect_timeout: Duration) -> Pool {
        Pool {
            addr,
            connect_timeout,
            permits: Arc::new(Semaphore::new(max)),
            configured: max,
            withheld: Mutex::new(0),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Applies the server's `Max-Connections` (or lifts it, with `None`): the pool
    /// never opens more than the smaller of it and the setting.
    pub fn limit_to(&self, server_max: Option<usize>) {
        let want = self.configured - server_max.unwrap_or(self.configured).min(self.configured);
        let mut withheld = self.withheld.lock().unwrap_or_else(|p| p.into_inner());
        if want > *withheld {
            // Only free permits can be taken: the busy ones come back later, and the
            // limit then holds from the next call on.
            *withheld += self.permits.forget_permits(want - *withheld);
        } else if want < *withheld {
            self.permits.add_permits(*withheld - want);
            *withheld = want;
        }
    }

    /// A connection: an idle one if any is fit for reuse, else a new one. Waits for
    /// a free slot when all are busy (the caller bounds the wait).
    pub async fn get(&self) -> Result<Conn, ConnectError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ConnectError::Failed)?;
        while let Some(stream) = self.pop_idle() {
            if still_open(&stream) {
                return Ok(Conn {
                    stream,
                    reused: true,
                    _permit: permit,
                });
            }
        }
        let stream = tokio::time::timeout(self.connect_timeout, TcpStream::connect(&self.addr))
            .await
            .map_err(|_| ConnectError::Timeout)?
            .map_err(|_| ConnectError::Failed)?;
        let _ = stream.set_nodelay(true);
        Ok(Conn {
            stream,
            reused: false,
            _permit: permit,
        })
    }

    /// A connection that is certainly new (for a retry after a reused one failed).
    pub async fn fresh(&self) -> Result<Conn, ConnectError> {
        self.close_idle();
        self.get().await
    }

    /// Closes every idle connection.
    pub fn close_idle(&self) {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn pop_idle(&self) -> Option<TcpStream> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((stream, since)) = idle.pop() {
            if since.elapsed() < IDLE_LIMIT {
                return Some(stream);
            }
        }
        None
    }

    /// Keeps `conn` for reuse.
    pub fn put_back(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.push((conn.stream, Instant::now()));
    }
}

/// Whether an idle connection is still usable: not closed by the server, and with
/// nothing unread on it.
fn still_open(stream: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}
