//! One exchange on a pooled connection: write while reading (so that neither side
//! waits on the other), `100 Continue`, and one retry when a reused connection turns
//! out to have been closed by the server.
//!
//! It works on the service's connection pool and answer limits, not on the service
//! itself, so that it sits below the service that drives it.

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::failure::Failure;
use super::pool::{ConnectError, Pool};
use super::reader::{Answer, Limits, ReadError, Reader};
use super::wire::WireError;

/// What follows a `100 Continue`.
#[derive(Clone, Copy)]
pub(super) enum AfterContinue<'a> {
    /// The rest of the body.
    Send(&'a [u8]),
    /// Nothing: the module has no more of the body, and the `100` is the answer.
    Stop,
    /// Nothing was previewed (or the preview held the whole body): a `100` is wrong.
    Error,
}

/// An exchange that failed, and whether trying again on a new connection is safe (a
/// reused connection the server had closed before any answer byte).
struct Attempt {
    failure: Failure,
    retry: bool,
}

/// Writes `first` on a connection of `pool` and reads the answer, and after a
/// `100 Continue` what `after_continue` says. Retries once on a new connection when a
/// reused one turns out closed.
pub(super) async fn send(
    pool: &Pool,
    limits: Limits,
    first: &[u8],
    after_continue: AfterContinue<'_>,
) -> Result<Answer, Failure> {
    let mut conn = pool.get().await.map_err(connect_failure)?;
    loop {
        let reused = conn.reused;
        match attempt(&mut conn.stream, limits, first, after_continue).await {
            Ok((answer, reusable)) => {
                if reusable {
                    pool.put_back(conn);
                }
                return Ok(answer);
            }
            Err(a) if a.retry && reused => {
                drop(conn);
                conn = pool.fresh().await.map_err(connect_failure)?;
            }
            Err(a) => return Err(a.failure),
        }
    }
}

async fn attempt(
    stream: &mut tokio::net::TcpStream,
    limits: Limits,
    first: &[u8],
    after_continue: AfterContinue<'_>,
) -> Result<(Answer, bool), Attempt> {
    let (read_half, mut write_half) = stream.split();
    let mut reader = Reader::new(read_half);
    let (mut answer, mut written) =
        write_while_reading(&mut reader, &mut write_half, first, limits)
            .await
            .map_err(|e| attempt_failure(e, reader.started))?;
    if answer.status == 100 {
        match after_continue {
            AfterContinue::Send(rest) => {
                (answer, written) = write_while_reading(&mut reader, &mut write_half, rest, limits)
                    .await
                    .map_err(|e| attempt_failure(e, true))?;
                if answer.status == 100 {
                    return Err(Attempt {
                        failure: Failure::Protocol(WireError::StatusLine),
                        retry: false,
                    });
                }
            }
            // The server waits for the rest of a truncated body: the connection
            // is left in the middle of a message and must not be reused.
            AfterContinue::Stop => return Ok((answer, false)),
            AfterContinue::Error => {
                return Err(Attempt {
                    failure: Failure::Protocol(WireError::StatusLine),
                    retry: false,
                })
            }
        }
    }
    let reusable = written && answer.keeps_alive() && !reader.has_leftover();
    Ok((answer, reusable))
}

/// Writes `bytes` while reading an answer, so that a server answering before it has
/// read everything (or streaming its answer back) never deadlocks with the client.
/// Returns the answer and whether all of `bytes` was written.
async fn write_while_reading<R, W>(
    reader: &mut Reader<R>,
    writer: &mut W,
    bytes: &[u8],
    limits: Limits,
) -> Result<(Answer, bool), ReadError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let write = writer.write_all(bytes);
    let read = reader.answer(limits);
    tokio::pin!(write, read);
    let mut write_done = false;
    let mut written = false;
    loop {
        tokio::select! {
            result = &mut write, if !write_done => {
                write_done = true;
                written = result.is_ok();
            }
            answer = &mut read => return answer.map(|a| (a, written)),
        }
    }
}

fn connect_failure(e: ConnectError) -> Failure {
    match e {
        ConnectError::Timeout | ConnectError::Failed => Failure::Connect,
    }
}

fn attempt_failure(e: ReadError, started: bool) -> Attempt {
    match e {
        ReadError::Io => Attempt {
            failure: Failure::Io,
            retry: !started,
        },
        ReadError::Wire(WireError::Truncated) => Attempt {
            failure: Failure::Protocol(WireError::Truncated),
            retry: !started,
        },
        ReadError::Wire(w) => Attempt {
            failure: Failure::Protocol(w),
            retry: false,
        },
    }
}
