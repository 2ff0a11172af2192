//! The request headers a response varies on.
//!
//! Its own file because the storage policy, the stored object and the disk tier's
//! index rebuild all read a response's `Vary` this way.

use http::{header, HeaderMap, HeaderName};

/// The request headers a response varies on (its `Vary` names, lowercase, once each).
pub fn vary_names(headers: &HeaderMap) -> Vec<HeaderName> {
    let mut names = Vec::new();
    for v in headers.get_all(header::VARY) {
        let Ok(s) = v.to_str() else { continue };
        for n in s.split(',') {
            let n = n.trim();
            if n.is_empty() {
                continue;
            }
            if let Ok(name) = HeaderName::from_bytes(n.to_ascii_lowercase().as_bytes()) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    names
}
