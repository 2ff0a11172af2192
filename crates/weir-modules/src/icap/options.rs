//! What a service says of itself in its OPTIONS answer (RFC 3507, 4.10), and what
//! follows for each message: send it or not, with a preview or whole.

use std::time::{Duration, Instant};

use weir_api::http::HeaderMap;

/// How long an OPTIONS answer without `Options-TTL` is trusted: the service may
/// change without changing its ISTag, so it is asked again now and then.
const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// The ICAP methods a service offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcapMethod {
    /// Request modification.
    Reqmod,
    /// Response modification.
    Respmod,
}

impl IcapMethod {
    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            IcapMethod::Reqmod => "REQMOD",
            IcapMethod::Respmod => "RESPMOD",
        }
    }
}

/// How to send one message, from the service's `Transfer-*` lists and `Preview`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// Do not send it (`Transfer-Ignore`).
    Ignore,
    /// Send the body whole, without a preview (`Transfer-Complete`).
    Complete,
    /// Send a preview of at most this many bytes first (`Transfer-Preview`).
    Preview(usize),
}

/// A service's OPTIONS answer, as far as the client uses it.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// `Methods`.
    pub methods: Vec<IcapMethod>,
    /// `ISTag`, as sent (quotes included).
    pub istag: Option<String>,
    /// `Preview`: the bytes the service wants to see first, if it takes previews.
    pub preview: Option<usize>,
    /// `Max-Connections`.
    pub max_connections: Option<usize>,
    transfer_preview: Vec<String>,
    transfer_ignore: Vec<String>,
    transfer_complete: Vec<String>,
    /// When this answer stops being trusted (`Options-TTL`).
    pub expires: Instant,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

fn number(headers: &HeaderMap, name: &str) -> Option<usize> {
    header(headers, name)?.parse().ok()
}

fn list(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .collect()
}

impl ServiceOptions {
    /// Reads the headers of a `200` OPTIONS answer received at `now`.
    pub fn from_headers(headers: &HeaderMap, now: Instant) -> ServiceOptions {
        let methods = list(headers, "methods")
            .iter()
            .filter_map(|m| match m.as_str() {
                "reqmod" => Some(IcapMethod::Reqmod),
                "respmod" => Some(IcapMethod::Respmod),
                _ => None,
            })
            .collect();
        let ttl = number(headers, "options-ttl")
            .map(|s| Duration::from_secs(s as u64))
            .unwrap_or(DEFAULT_TTL);
        ServiceOptions {
            methods,
            istag: header(headers, "istag").map(str::to_owned),
            preview: number(headers, "preview"),
            max_connections: number(headers, "max-connections").filter(|&n| n > 0),
            transfer_preview: list(headers, "transfer-preview"),
            transfer_ignore: list(headers, "transfer-ignore"),
            transfer_complete: list(headers, "transfer-complete"),
            expires: now + ttl,
        }
    }

    /// How to send a message whose URL path is `path`. `preview` overrides the size
    /// the service asked for. The extension of the path's last segment picks the
    /// list; a list holding `*` takes every extension the others do not name. With
    /// no `Transfer-*` lists at all, a service that takes previews gets one.
    pub fn transfer(&self, path: &str, preview: Option<usize>) -> Transfer {
        let preview_size = preview.or(self.preview);
        let with_preview = || preview_size.map_or(Transfer::Complete, Transfer::Preview);
        let ext = extension(path);
        let names = |l: &[String]| ext.as_deref().is_some_and(|e| l.iter().any(|x| x == e));
        let star = |l: &[String]| l.iter().any(|x| x == "*");
        if names(&self.transfer_ignore) {
            Transfer::Ignore
        } else if names(&self.transfer_complete) {
            Transfer::Complete
        } else if names(&self.transfer_preview) || star(&self.transfer_preview) {
            with_preview()
        } else if star(&self.transfer_ignore) {
            Transfer::Ignore
        } else if star(&self.transfer_complete) {
            Transfer::Complete
        } else {
            with_preview()
        }
    }
}

/// The lowercased extension of a URL path's last segment (`/a/b.TXT?x` gives `txt`).
fn extension(path: &str) -> Option<String> {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let last = path.rsplit('/').next()?;
    let (stem, ext) = last.rsplit_once('.')?;
    (!stem.is_empty() && !ext.is_empty()).then(|| ext.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_api::http::HeaderValue;

    fn options(pairs: &[(&'static str, &'static str)]) -> ServiceOptions {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(*n, HeaderValue::from_static(v));
        }
        ServiceOptions::from_headers(&h, Instant::now())
    }

    #[test]
    fn reads_the_answer() {
        let o = options(&[
            ("methods", "RESPMOD, REQMOD"),
            ("istag", "\"tag-1\""),
            ("preview", "1024"),
            ("max-connections", "7"),
            ("options-ttl", "60"),
        ]);
        assert_eq!(o.methods, [IcapMethod::Respmod, IcapMethod::Reqmod]);
        assert_eq!(o.istag.as_deref(), Some("\"tag-1\""));
        assert_eq!(o.preview, Some(1024));
        assert_eq!(o.max_connections, Some(7));
        assert!(o.expires > Instant::now() + Duration::from_secs(50));
        assert!(o.expires < Instant::now() + Duration::from_secs(70));
        let bare = options(&[("methods", "OPTIONS")]);
        assert!(bare.methods.is_empty() && bare.preview.is_none());
        assert!(bare.expires > Instant::now() + Duration::from_secs(3000));
    }

    #[test]
    fn transfer_lists_go_by_extension() {
        let o = options(&[
            ("preview", "30"),
            ("transfer-preview", "*"),
            ("transfer-ignore", "jpg, GIF"),
            ("transfer-complete", "exe"),
        ]);
        assert_eq!(o.transfer("/a/b.jpg", None), Transfer::Ignore);
        assert_eq!(o.transfer("/a/b.gif?x=1.exe", None), Transfer::Ignore);
        assert_eq!(o.transfer("/setup.EXE", None), Transfer::Complete);
        assert_eq!(o.transfer("/page.html", None), Transfer::Preview(30));
        assert_eq!(o.transfer("/dir.jpg/", None), Transfer::Preview(30));
        assert_eq!(o.transfer("/noext", Some(5)), Transfer::Preview(5));
        let complete_by_default = options(&[
            ("preview", "30"),
            ("transfer-preview", "html"),
            ("transfer-complete", "*"),
        ]);
        assert_eq!(
            complete_by_default.transfer("/x.html", None),
            Transfer::Preview(30)
        );
        assert_eq!(
            complete_by_default.transfer("/x.css", None),
            Transfer::Complete
        );
        assert_eq!(options(&[]).transfer("/x.css", None), Transfer::Complete);
        assert_eq!(
            options(&[("transfer-ignore", "*")]).transfer("/x", None),
            Transfer::Ignore
        );
    }

    #[test]
    fn extensions() {
        assert_eq!(extension("/a/b.tar.GZ").as_deref(), Some("gz"));
        assert_eq!(extension("/.hidden"), None);
        assert_eq!(extension("/a."), None);
        assert_eq!(extension("http://h/x.js#frag").as_deref(), Some("js"));
    }
}
