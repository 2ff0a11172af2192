//! What the tests of the diagnostic modules share: a transaction and empty request
//! and response heads.
//!
//! Its own file (compiled for tests only) so that each module's tests reach it
//! without depending on the diagnostics facade that declares those modules.

use weir_api::{engine, RequestHead, ResponseHead, Txn};

pub fn txn() -> Txn {
    engine::new_txn("127.0.0.1:4000".parse().unwrap(), 1)
}

pub fn request() -> RequestHead {
    weir_api::http::Request::new(()).into_parts().0
}

pub fn response() -> ResponseHead {
    weir_api::http::Response::new(()).into_parts().0
}
