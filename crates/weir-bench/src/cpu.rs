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

/// The sum over `pids`; None if any is unreadable.
pub fn total_cpu_seconds(pids: &[u32]) -> Option<f64> {
    pids.iter().map(|&p| cpu_seconds(p)).sum()
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
    }
}
