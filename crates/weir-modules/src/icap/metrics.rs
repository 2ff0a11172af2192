//! The ICAP module's counters, shared by all its services (exported as
//! `weir_module_icap_<name>_total`).

use weir_api::{Counter, ModuleContext};

use super::failure::Failure;
use super::settings::Policy;

/// Every counter of the module.
#[derive(Clone)]
pub struct Metrics {
    /// REQMOD and RESPMOD requests sent.
    pub requests: Counter,
    /// OPTIONS requests sent.
    pub options: Counter,
    /// `204` answers: the message was used as it was.
    pub unmodified: Counter,
    /// `200` answers applied: the message was adapted.
    pub modified: Counter,
    /// REQMOD answered with an HTTP response, sent to the client.
    pub responded: Counter,
    /// Messages a service did not take (method not offered, `Transfer-Ignore`).
    pub skipped: Counter,
    /// Bodies over `[limits] module_body` that a service wanted whole.
    pub oversize: Counter,
    /// Answers whose ISTag differed from the OPTIONS one.
    pub istag_changes: Counter,
    /// Services that could not be reached.
    pub failures_connect: Counter,
    /// Exchanges over the service's timeout.
    pub failures_timeout: Counter,
    /// Connections that failed in the middle of an exchange.
    pub failures_io: Counter,
    /// Malformed, oversized or cut answers.
    pub failures_protocol: Counter,
    /// Error statuses.
    pub failures_status: Counter,
    /// Messages not sent to a service resting after it failed (`retry_after`).
    pub failures_resting: Counter,
    /// Messages passed on unadapted after a failure or an oversize body.
    pub bypassed: Counter,
    /// Clients answered `503` after a failure or an oversize body.
    pub failed_closed: Counter,
}

impl Metrics {
    /// The counters, registered with the engine.
    pub fn new(context: &ModuleContext) -> Metrics {
        let c = |name: &str, help: &str| context.counter(name, help);
        Metrics {
            requests: c(
                "icap_requests",
                "REQMOD and RESPMOD requests sent to ICAP services",
            ),
            options: c("icap_options", "OPTIONS requests sent to ICAP services"),
            unmodified: c(
                "icap_unmodified",
                "ICAP 204 answers (message used unchanged)",
            ),
            modified: c(
                "icap_modified",
                "ICAP 200 answers applied (message adapted)",
            ),
            responded: c(
                "icap_responded",
                "REQMOD answers that were an HTTP response",
            ),
            skipped: c(
                "icap_skipped",
                "messages a service does not take (Methods, Transfer-Ignore)",
            ),
            oversize: c(
                "icap_oversize",
                "bodies over [limits] module_body a service wanted whole",
            ),
            istag_changes: c(
                "icap_istag_changes",
                "answers with a new ISTag (OPTIONS asked again)",
            ),
            failures_connect: c(
                "icap_failures_connect",
                "ICAP services that could not be reached",
            ),
            failures_timeout: c(
                "icap_failures_timeout",
                "ICAP exchanges over the service timeout",
            ),
            failures_io: c(
                "icap_failures_io",
                "ICAP connections that failed during an exchange",
            ),
            failures_protocol: c(
                "icap_failures_protocol",
                "malformed, oversized or cut ICAP answers",
            ),
            failures_status: c("icap_failures_status", "ICAP error statuses"),
            failures_resting: c(
                "icap_failures_resting",
                "messages not sent to an ICAP service resting after a failure",
            ),
            bypassed: c(
                "icap_bypassed",
                "messages passed on unadapted by the bypass policy",
            ),
            failed_closed: c(
                "icap_failed_closed",
                "clients answered 503 by the fail-closed policy",
            ),
        }
    }

    /// Counts a failure by its kind.
    pub fn failure(&self, failure: &Failure) {
        match failure {
            Failure::Connect => &self.failures_connect,
            Failure::Timeout => &self.failures_timeout,
            Failure::Io => &self.failures_io,
            Failure::Protocol(_) => &self.failures_protocol,
            Failure::Status(_) => &self.failures_status,
            Failure::Resting => &self.failures_resting,
        }
        .inc();
    }

    /// Counts what a policy did.
    pub fn policy(&self, policy: Policy) {
        match policy {
            Policy::Bypass => self.bypassed.inc(),
            Policy::FailClosed => self.failed_closed.inc(),
        }
    }
}
