//! The header names and values an instance wrote lately, kept parsed. A filter tends
//! to write the same few fields on every transaction (`x-wasm: 1`); parsing and
//! copying a name and a value each time, then freeing them once the response is
//! sent, cost a filter that adds one header about 250 instructions a hit.
//! A name or value seen lately is cloned instead (a reference count for a custom
//! name or any value, nothing for a standard name).

use weir_api::http::header::{HeaderName, HeaderValue};

/// How many names and how many values are kept.
const KEPT: usize = 8;

/// Values longer than this are parsed every time: the point is the short constant
/// values filters add, and memory stays bounded.
const LONGEST_VALUE: usize = 64;

/// Recently parsed names and values, replaced in turn.
#[derive(Default)]
pub(crate) struct Recent {
    names: Vec<HeaderName>,
    next_name: usize,
    values: Vec<HeaderValue>,
    next_value: usize,
}

impl Recent {
    /// `bytes` as a header name, as `HeaderName::from_bytes` reads it.
    pub fn name(&mut self, bytes: &[u8]) -> Option<HeaderName> {
        // Kept names are lowercase, as parsing leaves them: other spellings are
        // parsed (and come out the same).
        if let Some(name) = self.names.iter().find(|n| n.as_str().as_bytes() == bytes) {
            return Some(name.clone());
        }
        let name = HeaderName::from_bytes(bytes).ok()?;
        keep(&mut self.names, &mut self.next_name, name.clone());
        Some(name)
    }

    /// `bytes` as a header value, as `HeaderValue::from_bytes` reads it.
    pub fn value(&mut self, bytes: &[u8]) -> Option<HeaderValue> {
        if bytes.len() > LONGEST_VALUE {
            return HeaderValue::from_bytes(bytes).ok();
        }
        if let Some(value) = self.values.iter().find(|v| v.as_bytes() == bytes) {
            return Some(value.clone());
        }
        let value = HeaderValue::from_bytes(bytes).ok()?;
        keep(&mut self.values, &mut self.next_value, value.clone());
        Some(value)
    }
}

fn keep<T>(kept: &mut Vec<T>, next: &mut usize, item: T) {
    if kept.len() < KEPT {
        kept.push(item);
    } else {
        kept[*next] = item;
        *next = (*next + 1) % KEPT;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_parsing_does_whether_kept_or_not() {
        let mut recent = Recent::default();
        for _ in 0..2 {
            assert_eq!(recent.name(b"x-wasm").unwrap(), "x-wasm");
            assert_eq!(recent.name(b"X-Wasm").unwrap(), "x-wasm");
            assert_eq!(recent.name(b"content-type").unwrap(), "content-type");
            assert!(recent.name(b"bad name").is_none());
            assert!(recent.name(b"").is_none());
            assert_eq!(recent.value(b"1").unwrap(), "1");
            assert_eq!(recent.value(b"").unwrap(), "");
            assert!(recent.value(b"a\nb").is_none());
            let long = vec![b'v'; LONGEST_VALUE + 1];
            assert_eq!(recent.value(&long).unwrap().as_bytes(), &long[..]);
        }
        assert_eq!(recent.values.len(), 2, "the long value is not kept");
    }

    #[test]
    fn keeps_at_most_a_few_replacing_the_oldest() {
        let mut recent = Recent::default();
        for i in 0..KEPT * 3 {
            let name = format!("x-{i}");
            assert_eq!(recent.name(name.as_bytes()).unwrap(), name.as_str());
            assert_eq!(recent.value(name.as_bytes()).unwrap(), name.as_str());
        }
        assert_eq!((recent.names.len(), recent.values.len()), (KEPT, KEPT));
        let newest = format!("x-{}", KEPT * 3 - 1);
        assert!(recent.names.iter().any(|n| n == newest.as_str()));
        assert!(!recent.names.iter().any(|n| n == "x-0"));
    }
}
