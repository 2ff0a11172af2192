//! [`ConfigError`], the semantic [`Issue`] validation reports, and how parse and
//! validation errors become one.

use super::spans::{Document, KeyPath};

/// A configuration error, naming the file, line and key where it was found.
///
/// Displayed as ``weir.toml:7: key `listen[0].origin`: message``; the line and key
/// parts are left out when unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, or `<config>` for a configuration checked by [`Config::validate`]
    /// (for [`Config::module_error`], the configuration's `source`, `<defaults>` when
    /// built in code).
    ///
    /// [`Config::validate`]: super::Config::validate
    /// [`Config::module_error`]: super::Config::module_error
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Dotted key path, e.g. `listen[1].origin`, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// One semantic problem.
#[derive(Debug)]
pub(crate) struct Issue {
    /// Keys the problem is about, most specific first. An error is reported against the
    /// first one written in the file, so that a value left at its default is not blamed
    /// for a conflict with one the user wrote.
    pub(crate) keys: Vec<KeyPath>,
    /// What is wrong.
    pub(crate) message: String,
}

impl ConfigError {
    /// A TOML syntax error, located through its span in the recovered document.
    pub(crate) fn from_syntax(doc: &Document<'_>, file: &str, error: &toml::de::Error) -> Self {
        let message = error.message().to_string();
        let span = error.span();
        let key = span.clone().and_then(|span| {
            doc.path_at(span.start).or_else(|| {
                // Recovery drops a repeated key, so only its table can be found.
                let table = doc.table_before(span.start);
                if message != "duplicate key" {
                    return table;
                }
                let name = doc.text(span).trim_matches(|c| c == '"' || c == '\'');
                Some(table.unwrap_or_default().key(name))
            })
        });
        ConfigError {
            file: file.to_string(),
            line: span.map(|span| doc.line_of(span.start)),
            key: key.map(|path| path.to_string()),
            message,
        }
    }

    /// A type or value error reported by serde, located through its span.
    pub(crate) fn from_serde(doc: &Document<'_>, file: &str, error: &toml::de::Error) -> Self {
        let message = error.message().to_string();
        let offset = error.span().map(|span| span.start);
        let mut key = offset.and_then(|offset| doc.path_at(offset));
        // serde blames the table for a missing field; naming the field itself tells the
        // reader what to add.
        if let Some(field) = missing_field(&message) {
            key = key.map(|path| path.key(field));
        }
        let line = match offset {
            Some(offset) => Some(doc.line_of(offset)),
            None => key.as_ref().and_then(|path| doc.line_of_path(path)),
        };
        ConfigError {
            file: file.to_string(),
            line,
            key: key.map(|path| path.to_string()),
            message,
        }
    }

    /// A semantic problem, reported against the first of its keys written in the file.
    pub(crate) fn from_issue(doc: Option<&Document<'_>>, file: &str, issue: Issue) -> Self {
        let Issue { keys, message } = issue;
        let key: Option<KeyPath> = doc
            .and_then(|doc| keys.iter().find(|path| doc.contains(path)))
            .or(keys.first())
            .cloned();
        let line = match (doc, &key) {
            (Some(doc), Some(path)) => doc.line_of_path(path),
            _ => None,
        };
        ConfigError {
            file: file.to_string(),
            line,
            key: key.map(|path| path.to_string()),
            message,
        }
    }

    /// An error about the file as a whole, e.g. that it cannot be read.
    pub(crate) fn whole_file(file: &str, message: String) -> Self {
        ConfigError {
            file: file.to_string(),
            line: None,
            key: None,
            message,
        }
    }
}

fn missing_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("missing field `")?
        .split('`')
        .next()
        .filter(|field| !field.is_empty())
}
