//! The standard process metrics (`process_resident_memory_bytes` and its family, as
//! Prometheus client libraries export them), read from `/proc/self` at scrape time, and
//! Weir's own peak resident size. Encoded by hand because they carry no `weir_` prefix.

use std::fmt::Write as _;

/// Figures of this process, where the system tells them (Linux).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ProcessFigures {
    /// Resident set size (VmRSS), bytes.
    pub resident: u64,
    /// Its high-water mark since start (VmHWM), bytes.
    pub resident_peak: u64,
    /// Virtual memory size (VmSize), bytes.
    pub virtual_size: u64,
    /// Open file descriptors.
    pub open_fds: u64,
}

impl ProcessFigures {
    /// Reads them now; fields the system does not tell are zero.
    pub fn read() -> ProcessFigures {
        let mut f = ProcessFigures::default();
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            for line in status.lines() {
                let kib = |rest: &str| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .map_or(0, |k| k * 1024)
                };
                if let Some(rest) = line.strip_prefix("VmRSS:") {
                    f.resident = kib(rest);
                } else if let Some(rest) = line.strip_prefix("VmHWM:") {
                    f.resident_peak = kib(rest);
                } else if let Some(rest) = line.strip_prefix("VmSize:") {
                    f.virtual_size = kib(rest);
                }
            }
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            // The directory being read holds one descriptor itself.
            f.open_fds = dir.count().saturating_sub(1) as u64;
        }
        f
    }
}

/// Appends the process metrics in the OpenMetrics text format.
pub(super) fn encode(out: &mut String) {
    let f = ProcessFigures::read();
    if f == ProcessFigures::default() {
        return;
    }
    let metrics = [
        (
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            f.resident,
        ),
        (
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            f.virtual_size,
        ),
        (
            "process_open_fds",
            "Number of open file descriptors",
            f.open_fds,
        ),
        (
            "weir_process_resident_memory_peak_bytes",
            "Highest resident memory size since start, in bytes",
            f.resident_peak,
        ),
    ];
    for (name, help, value) in metrics {
        let _ = write!(
            out,
            "# HELP {name} {help}.\n# TYPE {name} gauge\n{name} {value}\n"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_resident_size() {
        let f = ProcessFigures::read();
        assert!(f.resident > 0 && f.resident_peak >= f.resident);
        assert!(f.virtual_size >= f.resident);
        assert!(f.open_fds >= 3);
        let mut out = String::new();
        encode(&mut out);
        assert!(out.contains("\nprocess_resident_memory_bytes "));
        assert!(out.contains("# TYPE process_resident_memory_bytes gauge\n"));
    }
}
