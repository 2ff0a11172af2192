//! The `Date` field of Weir's responses (RFC 9110 §6.6.1), for both of its own
//! servers (`h1_response.rs`, `h2.rs`): formatted once a second per thread.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::HeaderValue;

/// Calls `f` with the `Date` field's value for now.
pub(super) fn with_date<R>(f: impl FnOnce(&HeaderValue) -> R) -> R {
    thread_local! {
        static DATE: RefCell<(u64, HeaderValue)> =
            const { RefCell::new((u64::MAX, HeaderValue::from_static(""))) };
    }
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with(|date| {
        let mut date = date.borrow_mut();
        if date.0 != second {
            let text = httpdate::fmt_http_date(now);
            *date = (
                second,
                HeaderValue::from_maybe_shared(Bytes::from(text))
                    .unwrap_or_else(|_| HeaderValue::from_static("")),
            );
        }
        f(&date.1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_date_is_an_http_date_of_now() {
        let value = with_date(HeaderValue::clone);
        let parsed = httpdate::parse_http_date(value.to_str().unwrap()).unwrap();
        let skew = SystemTime::now().duration_since(parsed).unwrap_or_default();
        assert!(skew.as_secs() <= 1, "{value:?}");
    }
}
