//! `[[origin]]` sections: protocol and TLS settings per origin, and their errors.

use super::support::*;
use crate::config::*;

const REVERSE: &str = "[[listen]]\naddr = \"127.0.0.1:8080\"\nmode = \"reverse\"\norigin = \"https://img.example\"\n\n";

/// A PEM file in a fresh directory, removed on drop.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, contents: &str) -> TempFile {
        let dir = std::env::temp_dir().join(format!(
            "weir-config-{}-{name}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
        TempFile(path)
    }

    fn toml(&self) -> String {
        format!("{:?}", self.0.display().to_string())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn ca_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).unwrap().pem()
}

#[test]
fn sections_parse_with_their_defaults() {
    let ca = TempFile::new("ca.pem", &ca_pem());
    let text = format!(
        "{REVERSE}[[origin]]\nurl = \"https://img.example:443\"\nprotocol = \"http2\"\nca_file = {}\n\n\
         [[origin]]\nurl = \"http://127.0.0.1:8081\"\n",
        ca.toml()
    );
    let c = parse(&text);
    assert_eq!(c.origin.len(), 2);
    assert_eq!(c.origin[0].protocol, OriginProtocol::Http2);
    assert!(c.origin[0].verifies());
    assert_eq!(c.origin[1].protocol, OriginProtocol::Auto);
    let listener = OriginUrl::parse("https://img.example").unwrap();
    assert!(c.origin[0].origin_url().unwrap().same_origin(&listener));
    assert_eq!(c.upstream.max_h2_connections_per_origin, 4);
}

#[test]
fn unreadable_or_invalid_ca_file_names_the_key() {
    let text = format!(
        "{REVERSE}[[origin]]\nurl = \"https://img.example\"\nca_file = \"/nonexistent/weir-ca.pem\"\n"
    );
    fails(&text, 8, "origin[0].ca_file", "cannot read");
    let junk = TempFile::new("junk.pem", "not a certificate\n");
    let text = format!(
        "{REVERSE}[[origin]]\nurl = \"https://img.example\"\nca_file = {}\n",
        junk.toml()
    );
    fails(&text, 8, "origin[0].ca_file", "no PEM certificate");
    let broken = TempFile::new(
        "broken.pem",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    let text = format!(
        "{REVERSE}[[origin]]\nurl = \"https://img.example\"\nca_file = {}\n",
        broken.toml()
    );
    fails(&text, 8, "origin[0].ca_file", "cannot be a trust anchor");
}

#[test]
fn tls_keys_need_an_https_origin() {
    let text = format!("{REVERSE}[[origin]]\nurl = \"http://a.example\"\ntls_verify = false\n");
    fails(&text, 8, "origin[0].tls_verify", "https:// origins only");
    let text = format!("{REVERSE}[[origin]]\nurl = \"http://a.example\"\nca_file = \"x.pem\"\n");
    fails(&text, 8, "origin[0].ca_file", "https:// origins only");
    let text = format!(
        "{REVERSE}[[origin]]\nurl = \"https://a.example\"\ntls_verify = false\nca_file = \"x.pem\"\n"
    );
    fails(
        &text,
        9,
        "origin[0].ca_file",
        "no use with `tls_verify = false`",
    );
}

#[test]
fn bad_url_protocol_and_duplicates() {
    let text = format!("{REVERSE}[[origin]]\nurl = \"img.example\"\n");
    fails(&text, 7, "origin[0].url", "needs a scheme");
    let text = format!("{REVERSE}[[origin]]\nurl = \"https://a.example\"\nprotocol = \"h3\"\n");
    fails(&text, 8, "origin[0].protocol", "unknown variant");
    let text = format!(
        "{REVERSE}[[origin]]\nurl = \"https://a.example\"\n\n[[origin]]\nurl = \"https://A.example:443/\"\n"
    );
    fails(
        &text,
        10,
        "origin[1].url",
        "already has a section (origin[0])",
    );
    let text = format!("{REVERSE}[[origin]]\nprotocol = \"http1\"\n");
    fails(&text, 6, "origin[0].url", "missing field `url`");
    let text = format!("{REVERSE}[upstream]\nmax_h2_connections_per_origin = 0\n");
    fails(
        &text,
        7,
        "upstream.max_h2_connections_per_origin",
        "at least 1",
    );
}

#[test]
fn a_port_outside_the_range_is_named() {
    let listener = "[[listen]]\naddr = \"127.0.0.1:8080\"\nmode = \"reverse\"\n";
    fails(
        &format!("{listener}origin = \"http://127.0.0.1:73617\"\n"),
        4,
        "listen[0].origin",
        "port 73617 is not between 1 and 65535",
    );
    fails(
        &format!(
            "{listener}origin = \"http://127.0.0.1:8081\"\n  [[listen.route]]\n  origin = \"http://a.example:0\"\n"
        ),
        6,
        "listen[0].route[0].origin",
        "port 0 is not between 1 and 65535",
    );
    fails(
        &format!("{REVERSE}[[origin]]\nurl = \"https://img.example:65536\"\n"),
        7,
        "origin[0].url",
        "port 65536 is not between 1 and 65535",
    );
    for (text, port) in [
        ("http://a.example:65535", Some(65535)),
        ("http://a.example:", None),
        ("http://[::1]", None),
        ("http://[::1]:8080", Some(8080)),
    ] {
        let authority: http::uri::Authority = text[7..].parse().unwrap();
        assert_eq!(authority_port(&authority), Ok(port), "{text}");
    }
}
