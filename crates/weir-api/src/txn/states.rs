//! Where a transaction keeps its modules' states ([`Txn::state`](super::Txn::state)).
//!
//! The first module that makes a state keeps it in the transaction itself, with its
//! module's index; any further ones go to a vector in the transaction's extras. A
//! chain with one module that keeps state (a proxy-wasm filter, `compress`, `clients`)
//! then allocates only the state itself, where it used to allocate the extras, a
//! vector of states and the state: two allocations and frees fewer per transaction.
//!
//! One slot, not more: a slot adds 20 bytes to every `Txn`, and a transaction carries
//! its (empty) place for one even without modules. With two slots, a cached hit with
//! no module at all cost about 150 instructions more (larger moves, and one of its
//! allocations grew past a size that mimalloc serves on its fast path).

use std::any::Any;

/// One module's state.
pub(super) type State = Box<dyn Any + Send>;

/// How many states the transaction holds inline (see above for why one).
const INLINE: usize = 1;

/// The states held inline, each with the index of the module it belongs to.
#[derive(Default)]
pub(super) struct States {
    /// Whose state each slot holds: meaningful only while the slot is full.
    owners: [u32; INLINE],
    slots: [Option<State>; INLINE],
}

impl States {
    /// Module `module`'s slot, empty when it has made no state yet: its inline slot,
    /// else a free inline slot (claimed for it), else its slot in `more` (indexed by
    /// module). An inline slot is never emptied once filled, so a module whose state
    /// went to `more` never finds a free inline slot later.
    pub(super) fn slot<'a>(
        &'a mut self,
        module: u32,
        more: impl FnOnce() -> &'a mut Vec<Option<State>>,
    ) -> &'a mut Option<State> {
        let mut free = None;
        for i in 0..INLINE {
            if self.slots[i].is_none() {
                free = free.or(Some(i));
            } else if self.owners[i] == module {
                return &mut self.slots[i];
            }
        }
        if let Some(i) = free {
            self.owners[i] = module;
            return &mut self.slots[i];
        }
        let more = more();
        let module = module as usize;
        if more.len() <= module {
            more.resize_with(module + 1, || None);
        }
        &mut more[module]
    }

    /// Module `module`'s state, if it made one.
    pub(super) fn get<'a>(
        &'a self,
        module: u32,
        more: Option<&'a [Option<State>]>,
    ) -> Option<&'a State> {
        for i in 0..INLINE {
            if let Some(state) = &self.slots[i] {
                if self.owners[i] == module {
                    return Some(state);
                }
            }
        }
        more?.get(module as usize)?.as_ref()
    }
}
