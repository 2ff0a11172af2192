//! What the access module answers: the denial page and the requests for credentials.
//! They name nothing of the proxy's setup (no rule, no host name, no version).

use weir_api::http::{header, HeaderMap, HeaderValue, StatusCode};
use weir_api::{Bytes, ListenerMode, Reply};

const DENIED_PAGE: &str =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Access denied</title></head>\n\
<body><h1>Access denied</h1>\n<p>The access policy of this proxy does not allow this request.</p>\n\
<p>If you need it, ask the administrator of your network.</p></body></html>\n";

const CREDENTIALS_PAGE: &str = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Authentication required</title></head>\n\
<body><h1>Authentication required</h1>\n<p>Sign in with your user name and password to use this proxy.</p></body></html>\n";

/// The module's answers, with their headers made once.
pub(crate) struct Replies {
    challenge: Option<HeaderValue>,
}

impl Replies {
    /// `realm`: the realm of the challenge, when the module authenticates.
    pub fn new(realm: Option<&str>) -> Replies {
        Replies {
            challenge: realm.map(|realm| {
                HeaderValue::from_str(&format!("Basic realm=\"{realm}\", charset=\"UTF-8\""))
                    .expect("the realm was checked when the settings were read")
            }),
        }
    }

    pub fn denied(&self) -> Reply {
        page(StatusCode::FORBIDDEN, DENIED_PAGE)
    }

    /// `407` with `Proxy-Authenticate` to a client that knows it talks to a proxy;
    /// `401` with `WWW-Authenticate` on a reverse listener, whose clients take the
    /// proxy for the site.
    pub fn challenge(&self, mode: ListenerMode) -> Reply {
        let (status, name) = match mode {
            ListenerMode::Reverse => (StatusCode::UNAUTHORIZED, header::WWW_AUTHENTICATE),
            _ => (
                StatusCode::PROXY_AUTHENTICATION_REQUIRED,
                header::PROXY_AUTHENTICATE,
            ),
        };
        let mut reply = page(status, CREDENTIALS_PAGE);
        if let Some(value) = &self.challenge {
            reply.headers.insert(name, value.clone());
        }
        reply
    }
}

fn page(status: StatusCode, html: &'static str) -> Reply {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Reply {
        status,
        headers,
        body: Bytes::from_static(html.as_bytes()),
    }
}
