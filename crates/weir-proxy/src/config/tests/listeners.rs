//! `[[listen]]` keys of the listener side: `tls`, `proxy_protocol`, transparent mode,
//! `timeouts.client_handshake`. (Certificate files themselves are tested with real
//! files through `weir check`: crates/weir/tests/listeners/.)

use super::support::*;
use crate::config::*;

const REVERSE: &str = "[[listen]]\naddr = \"127.0.0.1:8080\"\nmode = \"reverse\"\n\
                       origin = \"http://127.0.0.1:81\"\n";

#[test]
fn transparent_mode_and_proxy_protocol_parse() {
    let c = parse(
        "[[listen]]\naddr = \"0.0.0.0:3129\"\nmode = \"transparent\"\n\n\
         [[listen]]\naddr = \"127.0.0.1:8080\"\nmode = \"reverse\"\n\
         origin = \"http://127.0.0.1:81\"\nproxy_protocol = true\n",
    );
    assert_eq!(c.listen[0].mode, ListenMode::Transparent);
    assert!(!c.listen[0].proxy_protocol);
    assert!(c.listen[1].proxy_protocol);
    assert!(c.listen[1].tls.is_none());
}

#[test]
fn transparent_listeners_refuse_what_does_not_apply() {
    fails(
        "[[listen]]\naddr = \"0.0.0.0:3129\"\nmode = \"transparent\"\n\
         origin = \"http://127.0.0.1:81\"\n",
        4,
        "listen[0].origin",
        "only a reverse listener",
    );
    fails(
        "[[listen]]\naddr = \"0.0.0.0:3129\"\nmode = \"transparent\"\n\
         proxy_protocol = true\n",
        4,
        "listen[0].proxy_protocol",
        "does not apply",
    );
    fails(
        "[[listen]]\naddr = \"0.0.0.0:3129\"\nmode = \"transparent\"\n\
         tls = { certs = [ { cert = \"a.pem\", key = \"a.key\" } ] }\n",
        4,
        "listen[0].tls",
        "cannot terminate TLS",
    );
}

#[test]
fn tls_shapes_and_their_errors() {
    fails(
        &format!("{REVERSE}tls = {{ certs = [] }}\n"),
        5,
        "listen[0].tls.certs",
        "at least one certificate",
    );
    fails(
        &format!("{REVERSE}tls = {{ cert = \"a.pem\" }}\n"),
        5,
        "listen[0].tls.cert",
        "unknown field",
    );
    // The section form names the missing file on its own line.
    fails(
        &format!(
            "{REVERSE}\n  [[listen.tls.certs]]\n  cert = \"no-such-file.pem\"\n  key = \"k.key\"\n"
        ),
        7,
        "listen[0].tls.certs[0].cert",
        "cannot read `no-such-file.pem`",
    );
    fails(
        &format!("{REVERSE}tls = {{ certs = [ {{ cert = \"a.pem\" }} ] }}\n"),
        5,
        "listen[0].tls.certs[0].key",
        "missing field `key`",
    );
}

#[test]
fn client_handshake_must_be_positive() {
    let c = parse("[timeouts]\nclient_handshake = \"250ms\"\n");
    assert_eq!(
        c.timeouts.client_handshake.0,
        std::time::Duration::from_millis(250)
    );
    fails(
        "[timeouts]\nclient_handshake = 0\n",
        2,
        "timeouts.client_handshake",
        "greater than 0",
    );
}
