//! Reports administration modules publish (`ModuleContext::publish`): JSON at
//! `/admin/modules/<name>`, and lines added to `/metrics`. Held weakly, so a module a
//! reload drops takes its report with it.

use std::sync::{Mutex, Weak};

use weir_api::AdminReport;

use super::encode::lock;

/// The published reports, by module name.
#[derive(Default)]
pub(crate) struct Reports(Mutex<Vec<(String, Weak<dyn AdminReport>)>>);

impl Reports {
    /// Keeps `report` under `name`, replacing an earlier one of that name.
    pub(crate) fn publish(&self, name: &str, report: Weak<dyn AdminReport>) {
        let mut reports = lock(&self.0);
        reports.retain(|(n, r)| n != name && r.strong_count() > 0);
        reports.push((name.to_string(), report));
    }

    /// The JSON of the report published as `name`, while its module lives.
    pub(crate) fn json(&self, name: &str) -> Option<String> {
        let report = lock(&self.0)
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, r)| r.upgrade())?;
        // Outside the lock: a module's report may take a moment.
        Some(report.json())
    }

    /// Every live report's metric lines.
    pub(crate) fn encode(&self, out: &mut String) {
        let live: Vec<_> = lock(&self.0)
            .iter()
            .filter_map(|(_, r)| r.upgrade())
            .collect();
        for report in live {
            report.metrics(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Weak};

    use super::*;

    struct Fixed(&'static str);

    impl AdminReport for Fixed {
        fn json(&self) -> String {
            self.0.to_string()
        }
        fn metrics(&self, out: &mut String) {
            out.push_str("weir_module_fixed 1\n");
        }
    }

    fn weak(report: &Arc<Fixed>) -> Weak<dyn AdminReport> {
        Arc::downgrade(report) as Weak<dyn AdminReport>
    }

    #[test]
    fn a_report_is_replaced_by_name_and_dies_with_its_module() {
        let reports = Reports::default();
        let first = Arc::new(Fixed("{\"n\":1}"));
        reports.publish("m", weak(&first));
        assert_eq!(reports.json("m").as_deref(), Some("{\"n\":1}"));
        assert_eq!(reports.json("other"), None);
        let second = Arc::new(Fixed("{\"n\":2}"));
        reports.publish("m", weak(&second));
        assert_eq!(reports.json("m").as_deref(), Some("{\"n\":2}"));
        let mut out = String::new();
        reports.encode(&mut out);
        assert_eq!(out, "weir_module_fixed 1\n", "the replaced one is gone");
        drop(second);
        assert_eq!(reports.json("m"), None);
        out.clear();
        reports.encode(&mut out);
        assert!(out.is_empty());
    }
}
