//! The body events on one body: chunk by chunk, or, when a module asked for it, the
//! whole body at once within `[limits] module_body` and the shared budget. Uses the
//! engine's state and the module chain; used by the body hooks and the cache fill.

use bytes::Bytes;
use http::HeaderMap;
use weir_api::{BodyChunk, Event};

use super::budget::Room;
use crate::engine::Engine;
use crate::modules::txn::ModTxn;
use crate::modules::{call, run_event, Hook};

/// Runs the modules of each of `events` that the chain wants on one chunk, in order;
/// `Err` when a module that is not optional failed (the body is then cut).
pub(crate) async fn body_events(
    engine: &Engine,
    m: &mut ModTxn,
    events: &[Event],
    chunk: &mut BodyChunk,
) -> Result<(), ()> {
    let ModTxn { chain, txn } = m;
    for &event in events {
        if !chain.wants(event) {
            continue;
        }
        let callback = match event {
            Event::DeliverBody => call::deliver_body,
            Event::RequestBody => call::request_body,
            Event::ResponseBody => call::response_body,
            // Run on the trailers, after the body (`trailer_event`).
            _ => continue,
        };
        match run_event!(chain, event, txn, chunk, callback, &engine.metrics) {
            Hook::Continue => {}
            // A body event cannot replace the response any more; treat it as a failure.
            Hook::Respond(_) | Hook::Failed(_) => return Err(()),
        }
    }
    Ok(())
}

/// Runs the modules of a trailers event on the trailer fields that end a body; `Err`
/// when a module that is not optional failed or tried to answer (too late to).
pub(crate) async fn trailer_event(
    engine: &Engine,
    m: &mut ModTxn,
    event: Event,
    trailers: &mut HeaderMap,
) -> Result<(), ()> {
    let ModTxn { chain, txn } = m;
    if !chain.wants(event) {
        return Ok(());
    }
    let callback = match event {
        Event::RequestTrailers => call::request_trailers,
        _ => call::response_trailers,
    };
    match run_event!(chain, event, txn, trailers, callback, &engine.metrics) {
        Hook::Continue => Ok(()),
        Hook::Respond(_) | Hook::Failed(_) => Err(()),
    }
}

/// The body events of one body, chunk by chunk, or, when a module asked for it, the
/// whole body at once (up to a limit, past which it passes through unchanged).
pub(crate) struct BodyStage {
    limit: u64,
    mode: StageMode,
    held: bytes::BytesMut,
    /// What `held` takes of `[limits] module_body_total`.
    room: Room,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum StageMode {
    Undecided,
    Chunks,
    Whole,
    Unchanged,
}

impl BodyStage {
    pub fn new(limit: u64) -> BodyStage {
        BodyStage {
            limit,
            mode: StageMode::Undecided,
            held: bytes::BytesMut::new(),
            room: Room::default(),
        }
    }

    /// A stage whose mode is known now (the transaction's declarations are about to
    /// be reset for the next body).
    pub fn decided(limit: u64, whole: bool) -> BodyStage {
        BodyStage {
            mode: if whole {
                StageMode::Whole
            } else {
                StageMode::Chunks
            },
            ..BodyStage::new(limit)
        }
    }

    /// Runs `events` on the next piece of body (`last`: nothing follows) and returns
    /// the bytes to pass on, possibly none. `Err` when a module failed.
    pub async fn feed(
        &mut self,
        engine: &Engine,
        m: &mut ModTxn,
        events: &[Event],
        data: Bytes,
        last: bool,
    ) -> Result<Bytes, ()> {
        if self.mode == StageMode::Undecided {
            self.mode = if m.txn.wants_whole_body() {
                StageMode::Whole
            } else {
                StageMode::Chunks
            };
        }
        let mut chunk = match self.mode {
            StageMode::Unchanged => return Ok(data),
            StageMode::Chunks | StageMode::Undecided => BodyChunk { data, last },
            StageMode::Whole => {
                let total = (self.held.len() + data.len()) as u64;
                if !engine
                    .held
                    .admits(&mut self.room, total, self.limit, &engine.metrics)
                {
                    // Too large to hand over whole, or no room left to hold it: the
                    // module never sees this body.
                    self.mode = StageMode::Unchanged;
                    self.room = Room::default();
                    let mut out = std::mem::take(&mut self.held);
                    out.extend_from_slice(&data);
                    return Ok(out.freeze());
                }
                self.held.extend_from_slice(&data);
                if !last {
                    return Ok(Bytes::new());
                }
                BodyChunk {
                    data: std::mem::take(&mut self.held).freeze(),
                    last: true,
                }
            }
        };
        body_events(engine, m, events, &mut chunk).await?;
        // The modules have had the whole body: its room is given back.
        self.room = Room::default();
        Ok(chunk.data)
    }
}
