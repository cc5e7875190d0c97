//! loadgen's own CPU use, to tell whether the generator may have been the limit. Linux only:
//! `utime + stime` of `/proc/self/stat`, in clock ticks of 1/100 s (USER_HZ, fixed by the
//! kernel's ABI); `None` elsewhere.

use std::time::Duration;

const USER_HZ: u64 = 100;

/// CPU time (user + system) used by this process so far.
pub fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat(&stat)
}

/// Resident memory of this process (`VmRSS` of `/proc/self/status`), in bytes.
pub fn resident_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// CPU time the whole machine has been busy so far (every processor: `/proc/stat`'s `cpu` line,
/// all but idle and iowait; guest time is already in user time).
pub fn machine_busy_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_machine(&stat)
}

fn parse_machine(stat: &str) -> Option<Duration> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let busy: u64 = ticks
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, t)| t)
        .sum();
    (ticks.len() >= 8).then(|| Duration::from_millis(busy * 1000 / USER_HZ))
}

fn parse_stat(stat: &str) -> Option<Duration> {
    // The command name (field 2) is in parentheses and may contain spaces: fields after it are
    // counted from the last ')'. utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / USER_HZ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_found_after_the_command_name() {
        let stat = "4242 (load gen) R 1 4242 4242 0 -1 4194304 812 0 0 0 150 25 0 0 20 0 3 0 \
                    1000 100000 500 18446744073709551615";
        assert_eq!(parse_stat(stat), Some(Duration::from_millis(1750)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn machine_busy_time_leaves_out_idle_and_iowait() {
        let stat = "cpu  100 5 50 9000 300 7 8 2 0 0\ncpu0 50 2 25 4500 150 3 4 1 0 0\n";
        assert_eq!(parse_machine(stat), Some(Duration::from_millis(1720)));
        assert_eq!(parse_machine("cpu0 1 2 3\n"), None);
        assert_eq!(parse_machine("cpu  1 2 x 4 5 6 7 8\n"), None);
    }

    #[test]
    fn this_process_has_used_some_cpu_and_memory() {
        if cfg!(target_os = "linux") {
            let spin: u64 = (0..5_000_000u64).fold(0, |a, x| a.wrapping_add(x * x));
            assert!(spin > 0);
            assert!(process_cpu_time().is_some());
            assert!(resident_memory().unwrap() > 1 << 20);
        }
    }
}
