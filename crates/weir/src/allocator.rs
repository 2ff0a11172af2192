//! The global allocator and how it gives memory back.
//!
//! mimalloc rather than the system allocator: cheaper per allocation, and its cost
//! does not grow with what was allocated and freed before (docs/architecture.md).
//!
//! Its defaults keep freed memory resident for a while and commit whole arenas up
//! front, which suits short programs; a cache evicts and replaces objects all day, and
//! with those defaults its resident size ran 40-60% above the configured cache for
//! large objects. Weir's promise is that the configured size is the memory used
//! (docs/operations.md, "Sizing the cache"), so freed pages go back promptly.

use std::alloc::{GlobalAlloc, Layout};
use std::os::raw::c_void;

#[global_allocator]
static ALLOCATOR: Mimalloc = Mimalloc;

/// mimalloc, asked for alignment only when a type needs more than it always gives.
///
/// The `mimalloc` crate's allocator asks `mi_malloc_aligned` for every allocation.
/// mimalloc serves that on its fast path only up to 1 KiB; every larger block (read
/// buffers, header maps, boxed futures, bodies) takes its generic aligned path, about
/// 200 instructions, 14 times per cache miss. Plain `mi_malloc` aligns every block
/// to a machine word at least (its 24-, 40- and 56-byte blocks to no more), which is
/// all that nearly every Rust type asks for; Rust's own system allocator makes the
/// same choice with glibc's 16 bytes.
struct Mimalloc;

/// The alignment `mi_malloc` gives every block: a machine word (its block sizes are
/// whole words, and its pages start at least 16-byte aligned).
const MALLOC_ALIGN: usize = std::mem::size_of::<usize>();

/// Whether plain `mi_malloc` gives `layout` its alignment.
#[inline]
fn malloc_aligns(layout: &Layout) -> bool {
    layout.align() <= MALLOC_ALIGN
}

// SAFETY: every method forwards to mimalloc, which returns blocks of at least the
// asked size (or null) with the layout's alignment: `mi_malloc` when `malloc_aligns`
// holds, the aligned functions otherwise; `mi_free` and `mi_realloc` take blocks from
// either.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(&layout) {
            // SAFETY: see the impl.
            unsafe { libmimalloc_sys::mi_malloc(layout.size()) as *mut u8 }
        } else {
            // SAFETY: see the impl.
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(&layout) {
            // SAFETY: see the impl.
            unsafe { libmimalloc_sys::mi_zalloc(layout.size()) as *mut u8 }
        } else {
            // SAFETY: see the impl.
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator.
        unsafe { libmimalloc_sys::mi_free(ptr as *mut c_void) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if malloc_aligns(&layout) {
            // SAFETY: `ptr` came from this allocator; `mi_realloc` keeps the word
            // alignment `malloc_aligns` asks for.
            unsafe { libmimalloc_sys::mi_realloc(ptr as *mut c_void, new_size) as *mut u8 }
        } else {
            // SAFETY: see the impl.
            unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (the -sys crate does not name
/// it). Arenas are committed as they are used: that option is read before `main`, so
/// it is set when mimalloc is compiled (`.cargo/config.toml`).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Options set unless the operator set them in the environment (mimalloc reads
/// `MIMALLOC_<NAME>` at start; those win).
const OPTIONS: [(&str, libmimalloc_sys::mi_option_t, std::os::raw::c_long); 1] = [
    // Freed pages are returned to the system (MADV_DONTNEED) after 100 ms rather than
    // the default second, which under steady churn never elapses. Shorter delays give
    // back pages that the churn needs again at once, and each comes back as a page
    // fault and a cleared page: at 10 ms about 0.1 more faults per 1 KB miss and 5% fewer
    // misses per CPU-second than at 100 ms; at 0 a fifth fewer. At a second a 64 MiB
    // cache of 256 KB objects peaked over its bound (docs/benchmarks.md).
    ("MIMALLOC_PURGE_DELAY", PURGE_DELAY, 100),
];

/// Sets the options above; call first thing in `main`, before threads start.
pub fn return_freed_memory_promptly() {
    for (env, option, value) in OPTIONS {
        if std::env::var_os(env).is_none() {
            // SAFETY: mi_option_set only stores an integer in mimalloc's option table;
            // it is called before any other thread exists.
            #[allow(unsafe_code)]
            unsafe {
                libmimalloc_sys::mi_option_set(option, value)
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size and alignment the plain path serves comes back aligned, also after
    /// growing and shrinking, and so do those the aligned path serves.
    #[test]
    #[allow(unsafe_code)]
    fn blocks_have_the_alignment_asked_for() {
        for size in (1..=4200).step_by(7).chain([24, 40, 56, 1025, 65536]) {
            for align in [1, 2, 4, 8, 16, 64, 128, 4096] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: the layout's size is not zero; every block is freed with its
                // layout.
                unsafe {
                    let p = ALLOCATOR.alloc(layout);
                    assert!(
                        !p.is_null() && (p as usize).is_multiple_of(align),
                        "{size} {align}"
                    );
                    p.write_bytes(0xA5, size);
                    let q = ALLOCATOR.realloc(p, layout, size * 3);
                    assert!(
                        !q.is_null() && (q as usize).is_multiple_of(align),
                        "{size} {align}"
                    );
                    assert_eq!(*q.add(size - 1), 0xA5);
                    ALLOCATOR.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                    let z = ALLOCATOR.alloc_zeroed(layout);
                    assert!((z as usize).is_multiple_of(align) && *z.add(size - 1) == 0);
                    ALLOCATOR.dealloc(z, layout);
                }
            }
        }
    }
}
