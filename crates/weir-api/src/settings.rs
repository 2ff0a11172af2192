//! A module's own section of the configuration file, read into the module's own type.

use serde::de::DeserializeOwned;

/// The settings of one `[[module]]` section, without `name` and the engine's own keys.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    table: toml::Table,
}

/// A module's settings are wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// The key at fault, relative to the module's section, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.key {
            Some(k) => write!(f, "`{k}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for SettingsError {}

impl SettingsError {
    /// An error about `key`.
    pub fn at(key: impl Into<String>, message: impl Into<String>) -> SettingsError {
        SettingsError {
            key: Some(key.into()),
            message: message.into(),
        }
    }
}

impl Settings {
    /// Settings from a parsed table (used by the engine and by tests).
    pub fn from_table(table: toml::Table) -> Settings {
        Settings { table }
    }

    /// Settings parsed from TOML text, e.g. in a module's tests.
    pub fn parse(text: &str) -> Result<Settings, SettingsError> {
        text.parse::<toml::Table>()
            .map(Settings::from_table)
            .map_err(|e| SettingsError {
                key: None,
                message: e.message().to_string(),
            })
    }

    /// Reads the settings into the module's own type (derive `serde::Deserialize`;
    /// use `#[serde(deny_unknown_fields)]` so typos are caught at load).
    pub fn get<T: DeserializeOwned>(&self) -> Result<T, SettingsError> {
        T::deserialize(toml::Value::Table(self.table.clone())).map_err(|e| {
            let message = e.message().to_string();
            SettingsError {
                key: field_named_in(&message),
                message,
            }
        })
    }

    /// Whether there are no settings at all.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// The field serde names in "unknown field `x`" or "missing field `x`" messages.
fn field_named_in(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("missing field `"))?;
    Some(rest.split('`').next()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Mine {
        level: u32,
        #[serde(default)]
        names: Vec<String>,
    }

    #[test]
    fn typed_settings() {
        let s = Settings::parse("level = 3\nnames = [\"a\"]").unwrap();
        assert_eq!(
            s.get::<Mine>().unwrap(),
            Mine {
                level: 3,
                names: vec!["a".into()]
            }
        );
        let bad = Settings::parse("level = 3\nlevle = 4").unwrap();
        let e = bad.get::<Mine>().unwrap_err();
        assert_eq!(e.key.as_deref(), Some("levle"), "{e}");
        let missing = Settings::parse("names = []")
            .unwrap()
            .get::<Mine>()
            .unwrap_err();
        assert_eq!(missing.key.as_deref(), Some("level"), "{missing}");
    }
}
