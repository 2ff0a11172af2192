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

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (the -sys crate does not name
/// it). Arenas are committed as they are used: that option is read before `main`, so
/// it is set when mimalloc is compiled (`.cargo/config.toml`).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Options set unless the operator set them in the environment (mimalloc reads
/// `MIMALLOC_<NAME>` at start; those win).
const OPTIONS: [(&str, libmimalloc_sys::mi_option_t, std::os::raw::c_long); 1] = [
    // Freed pages are returned to the system (MADV_DONTNEED) after 10 ms rather than
    // the default second, which under steady churn never elapses. At 0 every free of a
    // page's last block gives the page back and the next allocation faults it in again:
    // about a fifth fewer misses per CPU-second, for no less memory (docs/benchmarks.md).
    ("MIMALLOC_PURGE_DELAY", PURGE_DELAY, 10),
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
