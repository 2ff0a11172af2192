//! `[[module]]`: a module to load, its engine-side switches, and its own settings kept
//! as written for the module's builder.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[[module]]`: one module to load, and its settings.
///
/// `name`, `enabled` and `optional` are the engine's; every other key of the section
/// belongs to the module and is kept, unchecked, in [`settings`](Self::settings) for the
/// module's builder to read. That builder's errors are reported through
/// [`Config::module_error`], which finds their line in [`key_lines`](Self::key_lines).
///
/// [`Config::module_error`]: super::Config::module_error
#[derive(Debug, Clone, Deserialize)]
pub struct ModuleConfig {
    /// Which built-in module. Required; two enabled sections cannot share a name.
    pub name: String,
    /// `false` keeps the section configured but does not load the module. Default: true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// When the module fails in a transaction (a callback panics), `true` lets the
    /// transaction pass through as if the module were absent; `false` gives the client
    /// a 500. Default: false.
    #[serde(default)]
    pub optional: bool,
    /// The module's own settings: every key of the section other than `name`, `enabled`
    /// and `optional`, as written.
    #[serde(flatten)]
    pub settings: toml::Table,
    /// 1-based line of the section (its `[[module]]` header, or its inline table), when
    /// parsed from a file.
    #[serde(skip)]
    pub line: Option<usize>,
    /// 1-based line of every key written in the section, nested keys and array
    /// elements included, by their path relative to the section (`value`,
    /// `headers.x-a`, `list[2]`) as [`Config::module_error`] prints them. Empty when
    /// not parsed from a file.
    ///
    /// [`Config::module_error`]: super::Config::module_error
    #[serde(skip)]
    pub key_lines: BTreeMap<String, usize>,
}

fn default_true() -> bool {
    true
}
