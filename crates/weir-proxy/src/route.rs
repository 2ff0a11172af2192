//! Reverse-proxy routing: the first route whose host and path prefix match, else the
//! listener's default origin.

use crate::config::{ListenConfig, OriginUrl};
use crate::upstream::OriginAddr;

struct Route {
    /// Lowercase, without port; `None` matches any host.
    host: Option<String>,
    path_prefix: String,
    origin: OriginAddr,
}

/// The routes of one reverse listener.
pub(crate) struct Router {
    routes: Vec<Route>,
    default: Option<OriginAddr>,
}

fn origin_addr(text: &str) -> Result<OriginAddr, String> {
    Ok(OriginAddr::from_url(&OriginUrl::parse(text)?))
}

impl Router {
    pub fn from_config(listen: &ListenConfig) -> Result<Router, String> {
        let mut routes = Vec::with_capacity(listen.route.len());
        for r in &listen.route {
            routes.push(Route {
                host: r.host.as_ref().map(|h| h.to_ascii_lowercase()),
                path_prefix: r.path_prefix.clone(),
                origin: origin_addr(&r.origin)?,
            });
        }
        let default = listen.origin.as_deref().map(origin_addr).transpose()?;
        Ok(Router { routes, default })
    }

    /// The origin for a request to `host` (as in the Host header, port allowed) and `path`.
    pub fn route(&self, host: Option<&str>, path: &str) -> Option<&OriginAddr> {
        match self.route_index(host, path) {
            Some(i) => Some(&self.routes[i].origin),
            None => self.default.as_ref(),
        }
    }

    /// The index of the first route matching `host` and `path` (in configuration
    /// order), or `None` when the default origin applies.
    pub fn route_index(&self, host: Option<&str>, path: &str) -> Option<usize> {
        let host = host.map(strip_port);
        self.routes.iter().position(|r| {
            path.starts_with(&r.path_prefix)
                && match (&r.host, host) {
                    (None, _) => true,
                    (Some(want), Some(got)) => want.eq_ignore_ascii_case(got),
                    (Some(_), None) => false,
                }
        })
    }
}

fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(toml_routes: &str) -> ListenConfig {
        let text = format!(
            "addr = \"127.0.0.1:1\"\nmode = \"reverse\"\norigin = \"http://127.0.0.1:81\"\n{toml_routes}"
        );
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn first_matching_route_wins_then_default() {
        let l = listener(
            "[[route]]\nhost = \"img.example\"\npath_prefix = \"/a\"\norigin = \"http://127.0.0.1:82\"\n\
             [[route]]\npath_prefix = \"/a\"\norigin = \"http://127.0.0.1:83\"\n",
        );
        let r = Router::from_config(&l).unwrap();
        assert_eq!(r.route(Some("IMG.example:8080"), "/a/x").unwrap().port, 82);
        assert_eq!(r.route(Some("other"), "/a/x").unwrap().port, 83);
        assert_eq!(r.route(Some("img.example"), "/b").unwrap().port, 81);
        assert_eq!(r.route(None, "/b").unwrap().port, 81);
    }
}
