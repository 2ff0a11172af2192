//! The helper's side: reads jobs from the socket the proxy handed it as standard
//! input, runs them on a few worker threads, and answers each with its job's id as
//! soon as it is done (so a short job is not held behind a long one).

use std::collections::HashSet;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::wire::{Frame, FrameKind};
use crate::Priority;

/// Runs one job: its payload in, its answer out, or a message saying why not.
pub type Handler = fn(&[u8]) -> Result<Vec<u8>, String>;

/// The environment variable through which the pool tells a helper how to run
/// (`nice=19,sched_idle=1,threads=2`), so the helper's command line stays free for
/// whatever program starts it.
pub const OPTIONS_ENV: &str = "WEIR_HELPER_OPTIONS";

/// How a helper process runs: its priority and how many jobs it works on at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildOptions {
    /// The helper's CPU priority.
    pub priority: Priority,
    /// Worker threads, each running one job at a time.
    pub threads: usize,
}

impl Default for ChildOptions {
    fn default() -> ChildOptions {
        ChildOptions {
            priority: Priority::default(),
            threads: 1,
        }
    }
}

impl ChildOptions {
    /// The options as the environment variable's value.
    pub fn to_env(&self) -> String {
        format!(
            "nice={},sched_idle={},threads={}",
            self.priority.nice, self.priority.sched_idle as u8, self.threads
        )
    }

    /// Parses the environment variable's value; unknown or malformed parts are errors.
    pub fn from_env(text: &str) -> Result<ChildOptions, String> {
        let mut o = ChildOptions::default();
        for part in text.split(',').filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not key=value"))?;
            let number = |v: &str| {
                v.parse::<i64>()
                    .map_err(|_| format!("`{part}`: not a number"))
            };
            match key {
                "nice" => o.priority.nice = number(value)? as i32,
                "sched_idle" => o.priority.sched_idle = number(value)? != 0,
                "threads" => o.threads = number(value)?.max(1) as usize,
                _ => return Err(format!("unknown helper option `{key}`")),
            }
        }
        Ok(o)
    }
}

/// A helper process's main loop: applies the options from [`OPTIONS_ENV`] (a
/// priority it may not have is logged and skipped), then serves jobs from standard
/// input (a Unix socket) until the proxy closes it. Returns an error when standard
/// input is not a socket or the options are malformed.
pub fn serve_stdin(handler: Handler) -> io::Result<()> {
    let options = match std::env::var(OPTIONS_ENV) {
        Ok(text) => ChildOptions::from_env(&text).map_err(io::Error::other)?,
        Err(_) => ChildOptions::default(),
    };
    // A priority that cannot be had (a nice level below the proxy's own, without the
    // privilege) leaves the helper at the proxy's: never higher, so it serves anyway.
    if let Err(e) = options.priority.apply() {
        tracing::warn!("helper priority {:?}: {e}", options.priority);
    }
    let socket = UnixStream::from(io::stdin().as_fd().try_clone_to_owned()?);
    // A plain file or terminal on standard input is a mistake, not a proxy.
    socket.peer_addr()?;
    serve(socket, handler, options.threads)
}

/// Serves jobs from `socket` on `threads` worker threads until it is closed.
pub fn serve(socket: UnixStream, handler: Handler, threads: usize) -> io::Result<()> {
    let writer = Arc::new(Mutex::new(socket.try_clone()?));
    let (jobs, queue) = mpsc::channel::<Frame>();
    let queue = Arc::new(Mutex::new(queue));
    // The ids of the jobs received and not started. A cancel takes its job out, so a
    // worker that finds the id gone drops the job; a cancel of a job already started
    // or finished finds nothing, and the set stays as small as the backlog.
    let waiting = Arc::new(Mutex::new(HashSet::<u64>::new()));
    let workers: Vec<_> = (0..threads.max(1))
        .map(|_| {
            let (queue, writer, waiting) = (queue.clone(), writer.clone(), waiting.clone());
            std::thread::spawn(move || work(&queue, &writer, &waiting, handler))
        })
        .collect();
    let mut reader = io::BufReader::new(socket);
    let result = loop {
        match Frame::read_from(&mut reader) {
            Ok(Some(frame)) if frame.kind == FrameKind::Job => {
                if let Ok(mut w) = waiting.lock() {
                    w.insert(frame.id);
                }
                if jobs.send(frame).is_err() {
                    break Err(io::Error::other("every helper worker stopped"));
                }
            }
            Ok(Some(frame)) if frame.kind == FrameKind::Cancel => {
                if let Ok(mut w) = waiting.lock() {
                    w.remove(&frame.id);
                }
            }
            Ok(Some(_)) => {
                break Err(io::Error::other(
                    "a helper only takes job and cancel frames",
                ))
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    drop(jobs);
    for w in workers {
        let _ = w.join();
    }
    result
}

/// One worker thread: takes jobs until the queue closes or the socket breaks. A job
/// cancelled before it starts is dropped unanswered; one cancelled while it runs is
/// finished and answered (the proxy discards the answer).
fn work(
    queue: &Mutex<mpsc::Receiver<Frame>>,
    writer: &Mutex<UnixStream>,
    waiting: &Mutex<HashSet<u64>>,
    handler: Handler,
) {
    loop {
        let job = match queue.lock() {
            Ok(q) => match q.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
            Err(_) => return,
        };
        let cancelled = waiting.lock().is_ok_and(|mut w| !w.remove(&job.id));
        if cancelled {
            continue;
        }
        let (kind, payload) = match catch_unwind(AssertUnwindSafe(|| handler(&job.payload))) {
            Ok(Ok(answer)) => (FrameKind::Done, answer),
            Ok(Err(message)) => (FrameKind::Failed, message.into_bytes()),
            Err(_) => (FrameKind::Failed, b"the job panicked".to_vec()),
        };
        let answer = Frame {
            id: job.id,
            kind,
            payload,
        };
        let Ok(mut w) = writer.lock() else { return };
        if answer.write_to(&mut *w).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_and_reject_typos() {
        let o = ChildOptions {
            priority: Priority {
                nice: 10,
                sched_idle: false,
            },
            threads: 3,
        };
        assert_eq!(ChildOptions::from_env(&o.to_env()).unwrap(), o);
        assert_eq!(ChildOptions::from_env("").unwrap(), ChildOptions::default());
        assert!(ChildOptions::from_env("nicety=1").is_err());
        assert!(ChildOptions::from_env("nice=high").is_err());
    }

    fn upper(input: &[u8]) -> Result<Vec<u8>, String> {
        match input {
            b"fail" => Err("asked to fail".into()),
            b"panic" => panic!("asked to panic"),
            b"slow" => {
                std::thread::sleep(std::time::Duration::from_millis(300));
                Ok(b"SLOW".to_vec())
            }
            _ => Ok(input.to_ascii_uppercase()),
        }
    }

    #[test]
    fn answers_carry_their_job_ids_and_failures_are_answers_too() {
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        let helper = std::thread::spawn(move || serve(theirs, upper, 2));
        for (id, payload) in [(5u64, &b"abc"[..]), (6, b"fail"), (7, b"panic")] {
            Frame {
                id,
                kind: FrameKind::Job,
                payload: payload.to_vec(),
            }
            .write_to(&mut ours)
            .unwrap();
        }
        let mut answers: Vec<_> = (0..3)
            .map(|_| Frame::read_from(&mut ours).unwrap().unwrap())
            .map(|f| (f.id, f.kind, String::from_utf8(f.payload).unwrap()))
            .collect();
        answers.sort_by_key(|a| a.0);
        assert_eq!(
            answers,
            [
                (5, FrameKind::Done, "ABC".to_string()),
                (6, FrameKind::Failed, "asked to fail".to_string()),
                (7, FrameKind::Failed, "the job panicked".to_string()),
            ]
        );
        ours.shutdown(std::net::Shutdown::Both).unwrap();
        helper.join().unwrap().unwrap();
    }

    #[test]
    fn a_job_cancelled_before_it_starts_is_dropped_unanswered() {
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        let helper = std::thread::spawn(move || serve(theirs, upper, 1));
        let send = |w: &mut UnixStream, id: u64, kind: FrameKind, payload: &[u8]| {
            Frame {
                id,
                kind,
                payload: payload.to_vec(),
            }
            .write_to(w)
            .unwrap()
        };
        // One worker: job 2 waits behind the slow job 1, and is cancelled meanwhile.
        send(&mut ours, 1, FrameKind::Job, b"slow");
        send(&mut ours, 2, FrameKind::Job, b"abc");
        send(&mut ours, 2, FrameKind::Cancel, b"");
        send(&mut ours, 3, FrameKind::Job, b"def");
        // A cancel for a job the helper never had changes nothing.
        send(&mut ours, 99, FrameKind::Cancel, b"");
        let answers: Vec<_> = (0..2)
            .map(|_| Frame::read_from(&mut ours).unwrap().unwrap())
            .map(|f| (f.id, String::from_utf8(f.payload).unwrap()))
            .collect();
        assert_eq!(answers, [(1, "SLOW".to_string()), (3, "DEF".to_string())]);
        ours.set_read_timeout(Some(std::time::Duration::from_millis(400)))
            .unwrap();
        let more = Frame::read_from(&mut ours);
        assert!(more.is_err(), "no answer for the cancelled job: {more:?}");
        ours.set_read_timeout(None).unwrap();
        ours.shutdown(std::net::Shutdown::Both).unwrap();
        helper.join().unwrap().unwrap();
    }
}
