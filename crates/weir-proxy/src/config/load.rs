//! Loading a [`Config`]: reading the file, parsing it with the spans errors need, and
//! validating the result. Above `validate.rs`, which checks a `Config` it is given.

use std::path::Path;

use serde::Deserialize;

use super::error::ConfigError;
use super::spans::{Document, KeyPath};
use super::validate;
use super::whole::Config;

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::whole_file(&file, format!("cannot read: {e}")))?;
        Config::parse(&text, &file)
    }

    /// Parses and validates configuration text; `file` names it in errors.
    ///
    /// The error names the line and dotted key of the problem. Of several semantic
    /// problems, the one written first in the file is reported.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let (doc, syntax_error) = Document::parse(text);
        if let Some(e) = syntax_error {
            return Err(ConfigError::from_syntax(&doc, file, &e));
        }
        let mut config = Config::deserialize(doc.deserializer())
            .map_err(|e| ConfigError::from_serde(&doc, file, &e))?;
        config.source = file.to_string();
        for (i, module) in config.module.iter_mut().enumerate() {
            let at = KeyPath::top("module").index(i);
            module.line = doc.line_of_path(&at);
            module.key_lines = doc.key_lines_under(&at);
        }
        config.validate_in(Some(&doc), file)?;
        Ok(config)
    }

    /// Checks a configuration built in code (e.g. from [`Config::default`]) the way
    /// [`Config::parse`] checks a file; errors name the key but no file or line.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_in(None, "<config>")
    }

    fn validate_in(&self, doc: Option<&Document<'_>>, file: &str) -> Result<(), ConfigError> {
        let first = validate::check(self)
            .into_iter()
            .map(|issue| ConfigError::from_issue(doc, file, issue))
            .min_by_key(|e| e.line.unwrap_or(usize::MAX));
        first.map_or(Ok(()), Err)
    }
}
