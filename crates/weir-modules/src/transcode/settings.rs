//! The transcoder's `[[module]]` settings, checked and turned into what the module and
//! its helper pool need.

use std::time::Duration;

use weir_api::serde::Deserialize;
use weir_api::{Settings, SettingsError};
use weir_helper::Priority;

use super::codec::Params;

/// The content types transcoded unless `types` says otherwise.
pub const DEFAULT_TYPES: &[&str] = &["image/jpeg", "image/png", "image/gif", "image/webp"];

#[derive(Deserialize)]
#[serde(crate = "weir_api::serde", deny_unknown_fields)]
struct Raw {
    #[serde(default = "default_quality")]
    quality: u8,
    #[serde(default)]
    max_width: u32,
    #[serde(default)]
    max_height: u32,
    #[serde(default = "yes")]
    webp: bool,
    #[serde(default = "default_max_pixels")]
    max_pixels: u64,
    #[serde(default)]
    helpers: Option<usize>,
    #[serde(default = "default_nice")]
    nice: i32,
    #[serde(default = "yes")]
    sched_idle: bool,
    #[serde(default = "default_queue")]
    queue: usize,
    #[serde(default = "default_job_timeout")]
    job_timeout: String,
    #[serde(default = "default_restart_backoff")]
    restart_backoff: String,
    #[serde(default)]
    types: Option<Vec<String>>,
}

fn default_quality() -> u8 {
    60
}
fn yes() -> bool {
    true
}
fn default_max_pixels() -> u64 {
    16_000_000
}
fn default_nice() -> i32 {
    19
}
fn default_queue() -> usize {
    64
}
fn default_job_timeout() -> String {
    "2s".into()
}
fn default_restart_backoff() -> String {
    "100ms".into()
}

/// Checked settings.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscodeSettings {
    /// The codec's parameters, less the per-client `webp`.
    pub params: Params,
    /// Whether WebP is offered to clients that accept it.
    pub webp: bool,
    /// Helper processes.
    pub helpers: usize,
    /// Their priority.
    pub priority: Priority,
    /// Jobs in flight over all helpers.
    pub queue: usize,
    /// How long one job may take.
    pub job_timeout: Duration,
    /// The first wait before a dead helper is restarted (it doubles on each quick
    /// death, up to a minute).
    pub restart_backoff: Duration,
    /// Media types to transcode, lower case.
    pub types: Vec<String>,
}

impl TranscodeSettings {
    /// Reads and checks the settings; errors name the key.
    pub fn read(settings: &Settings) -> Result<TranscodeSettings, SettingsError> {
        let raw: Raw = settings.get()?;
        if !(1..=100).contains(&raw.quality) {
            return Err(SettingsError::at("quality", "must be 1 to 100"));
        }
        if raw.max_pixels == 0 {
            return Err(SettingsError::at("max_pixels", "must be above 0"));
        }
        if !(0..=19).contains(&raw.nice) {
            return Err(SettingsError::at("nice", "must be 0 to 19"));
        }
        let helpers = raw
            .helpers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        if !(1..=64).contains(&helpers) {
            return Err(SettingsError::at("helpers", "must be 1 to 64"));
        }
        if raw.queue == 0 {
            return Err(SettingsError::at("queue", "must be above 0"));
        }
        let job_timeout = duration(&raw.job_timeout)
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                SettingsError::at(
                    "job_timeout",
                    "must be a duration above 0, e.g. \"2s\" or \"500ms\"",
                )
            })?;
        let restart_backoff = duration(&raw.restart_backoff).ok_or_else(|| {
            SettingsError::at(
                "restart_backoff",
                "must be a duration, e.g. \"100ms\" or \"1s\"",
            )
        })?;
        let types = raw
            .types
            .unwrap_or_else(|| DEFAULT_TYPES.iter().map(|t| t.to_string()).collect());
        for (i, t) in types.iter().enumerate() {
            if !DEFAULT_TYPES.contains(&t.to_ascii_lowercase().as_str()) {
                return Err(SettingsError::at(
                    format!("types[{i}]"),
                    format!("`{t}` is not one of {}", DEFAULT_TYPES.join(", ")),
                ));
            }
        }
        Ok(TranscodeSettings {
            params: Params {
                quality: raw.quality,
                max_width: raw.max_width,
                max_height: raw.max_height,
                webp: false,
                max_pixels: raw.max_pixels,
            },
            webp: raw.webp,
            helpers,
            priority: Priority {
                nice: raw.nice,
                sched_idle: raw.sched_idle,
            },
            queue: raw.queue,
            job_timeout,
            restart_backoff,
            types: types.iter().map(|t| t.to_ascii_lowercase()).collect(),
        })
    }
}

/// `"250ms"` or `"2s"`.
fn duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    if let Some(ms) = t.strip_suffix("ms") {
        return ms.trim().parse().ok().map(Duration::from_millis);
    }
    t.strip_suffix('s')?
        .trim()
        .parse()
        .ok()
        .map(Duration::from_secs)
}
