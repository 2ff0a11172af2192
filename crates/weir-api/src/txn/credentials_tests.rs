//! Tests of `Txn::take_credentials`: from the request's fields, or as the engine set
//! them aside.

use http::header::{AUTHORIZATION, PROXY_AUTHORIZATION};
use http::HeaderValue;

use crate::{engine, Listener, ListenerMode, RequestHead, Txn};

fn txn(mode: ListenerMode) -> Txn {
    let mut t = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    engine::set_listener(&mut t, Listener { mode, tls: false });
    t
}

/// A request with both credentials fields, `Proxy-Authorization` on two lines.
fn request() -> RequestHead {
    let mut request = http::Request::new(()).into_parts().0;
    let h = &mut request.headers;
    h.append(
        PROXY_AUTHORIZATION,
        HeaderValue::from_static("Basic cHJveHk="),
    );
    h.append(
        PROXY_AUTHORIZATION,
        HeaderValue::from_static("Basic c2Vjb25k"),
    );
    h.append(AUTHORIZATION, HeaderValue::from_static("Basic b3JpZ2lu"));
    request
}

#[test]
fn each_mode_takes_its_own_field_from_the_request_every_line_of_it() {
    let mut r = request();
    let mut t = txn(ListenerMode::Forward);
    let taken = t.take_credentials(&mut r);
    assert_eq!(taken.unwrap(), "Basic cHJveHk=");
    assert!(!r.headers.contains_key(PROXY_AUTHORIZATION));
    assert_eq!(r.headers[AUTHORIZATION], "Basic b3JpZ2lu", "for the origin");
    assert_eq!(t.take_credentials(&mut r), None, "taken already");

    let mut r = request();
    let mut t = txn(ListenerMode::Reverse);
    assert_eq!(t.take_credentials(&mut r).unwrap(), "Basic b3JpZ2lu");
    assert!(!r.headers.contains_key(AUTHORIZATION));
    assert_eq!(r.headers.get_all(PROXY_AUTHORIZATION).iter().count(), 2);

    let mut r = request();
    let mut t = txn(ListenerMode::Transparent);
    assert_eq!(t.take_credentials(&mut r), None);
    assert_eq!(
        r.headers,
        request().headers,
        "a transparent client's are the origin's"
    );
}

#[test]
fn credentials_set_aside_are_handed_over_once_without_touching_the_request() {
    let mut r = request();
    let mut t = txn(ListenerMode::Forward);
    let value = HeaderValue::from_static("Basic YXNpZGU=");
    engine::set_aside_credentials(&mut t, Some(Box::new(value)));
    assert_eq!(t.take_credentials(&mut r).unwrap(), "Basic YXNpZGU=");
    assert_eq!(t.take_credentials(&mut r), None, "one module takes them");
    assert_eq!(r.headers, request().headers);
    assert_eq!(engine::untaken_credentials(&mut t), None);

    // Set aside, none: the request had none, and its fields are not looked at.
    let mut t = txn(ListenerMode::Forward);
    engine::set_aside_credentials(&mut t, None);
    assert_eq!(t.take_credentials(&mut r), None);
    assert_eq!(r.headers, request().headers);
}

#[test]
fn what_no_module_took_goes_back_and_is_then_looked_for_in_the_request() {
    let mut t = txn(ListenerMode::Reverse);
    let value = HeaderValue::from_static("Basic YmFjaw==");
    engine::set_aside_credentials(&mut t, Some(Box::new(value)));
    let back = engine::untaken_credentials(&mut t).unwrap();
    assert_eq!(back, "Basic YmFjaw==");
    let mut r = request();
    r.headers.insert(AUTHORIZATION, back);
    assert_eq!(t.take_credentials(&mut r).unwrap(), "Basic YmFjaw==");
    assert!(!r.headers.contains_key(AUTHORIZATION));
}

#[test]
fn the_credentials_field_follows_the_mode() {
    assert_eq!(
        ListenerMode::Forward.credentials_field(),
        Some(PROXY_AUTHORIZATION)
    );
    assert_eq!(
        ListenerMode::Reverse.credentials_field(),
        Some(AUTHORIZATION)
    );
    assert_eq!(ListenerMode::Transparent.credentials_field(), None);
}
