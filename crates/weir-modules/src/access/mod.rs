//! `access`: who may use the proxy for what. An ordered list of allow and deny rules
//! (first match wins) by client network, authenticated user and group, destination
//! domain, host or URL pattern, method, port, scheme, time of day and weekday; and
//! Basic proxy authentication against an htpasswd file. Squid's `http_access` and
//! `proxy_auth`, as a module of the public API.
//!
//! It runs at `RequestHeaders`, the first event, and answers a request it refuses
//! there: `403` with a page that names nothing of the proxy's setup, or a challenge
//! (`407` with `Proxy-Authenticate` on forward listeners, `401` with
//! `WWW-Authenticate` on reverse ones). The user it authenticated is the
//! transaction's user ([`Txn::set_user`]): the access log writes it and later modules
//! read it. The credentials header is taken out of the request
//! ([`Txn::take_credentials`]), so it is neither forwarded nor seen by other modules.

mod auth;
mod bits;
mod domains;
mod htpasswd;
mod literals;
mod reply;
mod rules;
mod settings;
mod sieve;
#[cfg(test)]
mod tests;
mod text;
mod view;
mod walk;
#[cfg(test)]
mod walk_tests;

use std::sync::Arc;
use std::time::Duration;

use weir_api::{
    Counter, Decision, Event, Events, Flow, ListenerMode, Module, ModuleContext, ModuleFactory,
    Reply, RequestHead, Settings, SettingsError, Timer, Txn,
};

use auth::{Authenticator, Checked};
use rules::{Action, LocalTime, Verdict};
use walk::RuleSet;

/// How often the htpasswd file is looked at for changes.
const HTPASSWD_CHECK: Duration = Duration::from_secs(1);

/// Builds [`Access`] from its `[[module]]` section.
pub struct AccessFactory;

impl ModuleFactory for AccessFactory {
    fn name(&self) -> &'static str {
        "access"
    }

    fn build(
        &self,
        settings: &Settings,
        context: &ModuleContext,
    ) -> Result<Arc<dyn Module>, SettingsError> {
        let config = settings::parse(settings)?;
        let auth = config
            .auth
            .map(|auth| Authenticator::new(auth).map(Arc::new))
            .transpose()
            .map_err(|e| SettingsError::at("htpasswd", e))?;
        let replies = reply::Replies::new(auth.as_ref().map(|a| a.config.realm.as_str()));
        Ok(Arc::new(Access {
            rules: config.rules,
            auth,
            replies,
            denied: context.counter("access_denied", "Requests the access rules denied (403)"),
            challenged: context.counter(
                "access_challenged",
                "Requests answered with a request for credentials (407 or 401)",
            ),
            failures: context.counter(
                "access_auth_failures",
                "Requests whose credentials were not valid",
            ),
            verified: context.counter(
                "access_auth_verified",
                "Credentials checked against the htpasswd file (not found in the cache)",
            ),
        }))
    }
}

/// The access module: rules, and authentication when it has an htpasswd file.
pub struct Access {
    rules: RuleSet,
    auth: Option<Arc<Authenticator>>,
    replies: reply::Replies,
    denied: Counter,
    challenged: Counter,
    failures: Counter,
    verified: Counter,
}

/// What the rules made of a request.
enum Judged {
    Continue,
    Respond(Reply),
    /// Answer after a pause: the client's credentials failed.
    RespondAfter(Duration, Reply),
}

impl Access {
    /// Applies the rules to the request of `txn`, with the credentials as checked.
    fn judge(&self, txn: &mut Txn, request: &RequestHead, checked: Option<Checked>) -> Judged {
        let listener = txn.listener();
        let can_ask = self.auth.is_some() && listener.mode != ListenerMode::Transparent;
        let default = match listener.mode {
            ListenerMode::Reverse => Action::Allow,
            ListenerMode::Forward | ListenerMode::Transparent => Action::Deny,
        };
        // Moved, not cloned: the user's name is shared with the cache, and each clone
        // is an atomic update of one counter that every worker touches.
        let (user, bad_credentials) = match checked {
            Some(Checked::User(user)) => (Some(user), false),
            Some(Checked::Bad) => (None, true),
            None => (None, false),
        };
        let verdict = view::with_view(txn, request, &LocalTime::now, |view| {
            walk::decide(&self.rules, view, user.as_deref(), can_ask, default)
        });
        if let Some(user) = user {
            txn.set_user(user);
        }
        match verdict {
            Verdict::Allow(_) => Judged::Continue,
            Verdict::Deny(rule) => {
                self.denied.inc();
                txn.log_field(
                    "access",
                    rule.map_or_else(|| "deny:default".to_string(), |i| format!("deny:rule[{i}]")),
                );
                Judged::Respond(self.replies.denied())
            }
            Verdict::Challenge => {
                self.challenged.inc();
                let reply = self.replies.challenge(listener.mode);
                match &self.auth {
                    Some(auth) if bad_credentials => {
                        self.failures.inc();
                        txn.log_field("auth", "failed");
                        Judged::RespondAfter(auth.failed(txn.client_addr().ip()), reply)
                    }
                    _ => Judged::Respond(reply),
                }
            }
        }
    }
}

impl Module for Access {
    fn name(&self) -> &str {
        "access"
    }

    fn events(&self) -> Events {
        Events::of(&[Event::RequestHeaders])
    }

    fn takes_credentials(&self) -> bool {
        self.auth.is_some()
    }

    fn on_request_headers<'a>(
        &'a self,
        txn: &'a mut Txn,
        request: &'a mut RequestHead,
    ) -> Flow<'a> {
        // None on transparent listeners, whose clients do not know of the proxy.
        let credentials = match &self.auth {
            Some(_) => txn.take_credentials(request),
            None => None,
        };
        let (Some(auth), Some(credentials)) = (&self.auth, credentials) else {
            return flow(self.judge(txn, request, None));
        };
        if let Some(checked) = auth.cached(credentials.as_bytes()) {
            return flow(self.judge(txn, request, Some(checked)));
        }
        self.verified.inc();
        Flow::wait(async move {
            let checked = auth.verify(credentials.as_bytes().to_vec()).await;
            if matches!(checked, Checked::User(_)) {
                auth.succeeded(txn.client_addr().ip());
            }
            match self.judge(txn, request, Some(checked)) {
                Judged::Continue => Decision::Continue,
                Judged::Respond(reply) => Decision::Respond(reply),
                Judged::RespondAfter(pause, reply) => {
                    tokio::time::sleep(pause).await;
                    Decision::Respond(reply)
                }
            }
        })
    }

    fn timers(&self) -> Vec<Timer> {
        match self.auth {
            Some(_) => vec![Timer {
                id: 0,
                after: HTPASSWD_CHECK,
                every: Some(HTPASSWD_CHECK),
            }],
            None => Vec::new(),
        }
    }

    fn on_timer(&self, _id: u32) {
        let Some(auth) = &self.auth else { return };
        match auth.reload_if_changed() {
            None => {}
            Some(Ok(users)) => {
                tracing::info!(file = %auth.path().display(), users, "access: htpasswd file read again")
            }
            Some(Err(e)) => {
                tracing::error!("access: {e}; keeping the users read before")
            }
        }
    }
}

fn flow<'a>(judged: Judged) -> Flow<'a> {
    match judged {
        Judged::Continue => Flow::Continue,
        Judged::Respond(reply) => Flow::Respond(reply),
        Judged::RespondAfter(pause, reply) => Flow::wait(async move {
            tokio::time::sleep(pause).await;
            Decision::Respond(reply)
        }),
    }
}
