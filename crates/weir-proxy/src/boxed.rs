//! Boxing a large future where it will live.
//!
//! `Box::pin(make())` builds the future on the stack and then copies it into its box,
//! the whole of it. Most of a large future is room for the states it reaches later
//! (a transaction's is several KiB, a fill's more), so the copy moves kilobytes that
//! hold nothing yet, of memory that is usually not in the cache: on a miss those
//! copies took about 2% of the CPU, far more than their instruction count suggests
//! (docs/benchmarks.md, session 16). Allocating first and writing the value into the
//! allocation lets the compiler build the future in place.

use std::pin::Pin;

/// The future `make` returns, made in its box.
#[inline(always)]
pub(crate) fn in_place<F>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    Box::into_pin(Box::write(Box::new_uninit(), make()))
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_future_runs_as_it_would_unboxed() {
        let big = [7u8; 4096];
        let f = super::in_place(|| async move { big.iter().map(|&b| b as u32).sum::<u32>() });
        assert_eq!(f.await, 7 * 4096);
    }
}
