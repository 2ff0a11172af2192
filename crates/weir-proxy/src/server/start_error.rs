//! [`StartError`]: why the proxy could not start. Its own file because every part of
//! startup (binding, workers, listeners) returns it.

/// Why the proxy could not start.
#[derive(Debug)]
pub struct StartError(pub(super) String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}
