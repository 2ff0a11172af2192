//! CPU time of a process from /proc: what "requests per CPU-second" divides by.

/// User + system CPU seconds used so far by process `pid` (all its threads), or None
/// when it is gone or /proc is not readable.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields are counted
    // from after its closing parenthesis, where field 3 (state) starts.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

/// Clock ticks per second (USER_HZ): `getconf CLK_TCK`, 100 (Linux's value on every
/// common architecture) when getconf is missing.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// The CPU time of a set of processes, read repeatedly. A process that exits (nginx's
/// cache loader does, a minute after start) keeps the last value read from it, so the
/// total never goes down; read often to lose little of a process that exits.
pub struct CpuMeter {
    pids: Vec<u32>,
    last: std::sync::Mutex<Vec<Option<f64>>>,
}

impl CpuMeter {
    pub fn new(pids: &[u32]) -> CpuMeter {
        CpuMeter {
            pids: pids.to_vec(),
            last: std::sync::Mutex::new(vec![None; pids.len()]),
        }
    }

    /// CPU seconds of all the processes so far; None when none was ever readable.
    pub fn read(&self) -> Option<f64> {
        let mut last = self.last.lock().unwrap();
        for (pid, l) in self.pids.iter().zip(last.iter_mut()) {
            if let Some(now) = cpu_seconds(*pid) {
                *l = Some(now);
            }
        }
        last.iter().copied().reduce(|a, b| match (a, b) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        })?
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_used_some_cpu() {
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let s = super::cpu_seconds(std::process::id()).expect("readable /proc");
        assert!(s >= 0.0);
        assert!(super::cpu_seconds(u32::MAX).is_none());
        let meter = super::CpuMeter::new(&[std::process::id(), u32::MAX]);
        assert!(meter.read().unwrap() >= s);
        assert!(super::CpuMeter::new(&[u32::MAX]).read().is_none());
    }
}
