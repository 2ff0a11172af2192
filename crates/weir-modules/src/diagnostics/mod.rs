//! Diagnostic modules: they do no useful work and exist to measure what the module
//! API itself costs (see the [crate documentation](crate) for the ladder they form).

mod add_headers;
mod body_copy;
mod empty;
mod stamp;
#[cfg(test)]
mod test_support;

pub use add_headers::{AddHeaders, AddHeadersFactory};
pub use body_copy::{BodyCopy, BodyCopyFactory};
pub use empty::{Empty, EmptyFactory};
