//! Runs the attacks of `tests/support/attacks.rs` one after another against a running dn-sim and
//! prints, per attack: the rate it achieved, the honest Echo client's calls and p50/p99/max
//! latency before and during it, dn-sim's peak resident memory during it (from `/proc/PID`, so
//! dn-sim must run on this machine as the same user), and how dn-sim's connection and HTTP/2
//! counters moved. `scripts/abuse.sh` starts dn-sim and runs this.
//!
//! Usage: abuse --target HOST:PORT --admin HOST:PORT --pid PID [--duration 3s] [--quick]
//!              [--attacks NAME,NAME...]

#[path = "../tests/support/attacks.rs"]
#[allow(dead_code)]
mod attacks;

use attacks::{Attack, AttackSize, HonestClient};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

struct Args {
    target: SocketAddr,
    admin: SocketAddr,
    pid: u32,
    duration: Duration,
    quick: bool,
    attacks: Vec<Attack>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut target, mut admin, mut pid) = (None, None, None);
    let (mut duration, mut quick, mut attacks) = (None, false, attacks::ALL.to_vec());
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--target" => target = Some(value()?.parse().map_err(|_| "--target: not HOST:PORT")?),
            "--admin" => admin = Some(value()?.parse().map_err(|_| "--admin: not HOST:PORT")?),
            "--pid" => pid = Some(value()?.parse().map_err(|_| "--pid: not a process ID")?),
            "--duration" => {
                let v = value()?;
                duration = Some(
                    common::units::parse_duration(&v).map_err(|e| format!("--duration: {e}"))?,
                );
            }
            "--quick" => quick = true,
            "--attacks" => {
                attacks = value()?
                    .split(',')
                    .map(|n| Attack::parse(n).ok_or(format!("--attacks: unknown attack '{n}'")))
                    .collect::<Result<_, _>>()?;
            }
            other => return Err(format!("unknown flag '{other}'")),
        }
    }
    Ok(Args {
        target: target.ok_or("--target is required")?,
        admin: admin.ok_or("--admin is required")?,
        pid: pid.ok_or("--pid is required")?,
        duration: duration.unwrap_or(if quick {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(3)
        }),
        quick,
        attacks,
    })
}

/// `/metrics` samples of dn-sim's connection and HTTP/2 families, by name with labels.
fn counters(admin: SocketAddr) -> BTreeMap<String, f64> {
    let mut text = String::new();
    if let Ok(mut s) = TcpStream::connect(admin) {
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let _ = write!(s, "GET /metrics HTTP/1.0\r\nHost: {admin}\r\n\r\n");
        let _ = s.read_to_string(&mut text);
    }
    text.lines()
        .filter(|l| {
            l.starts_with("dn_sim_connections_")
                || l.starts_with("dn_sim_http2_")
                || l.starts_with("dn_sim_streams_open")
        })
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn status_kib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix(field)
                    .and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok())
            })
        })
        .unwrap_or(0.0)
}

fn size_of(attack: Attack, args: &Args) -> AttackSize {
    let (connections, streams_per_connection) = match attack {
        // Past dn-sim's default 1,024 streams per connection, so the limit shows.
        Attack::StalledStreams => (4, if args.quick { 1100 } else { 1500 }),
        // 4 MiB messages of which 1 MiB each is sent: 32 MiB held (16 with --quick).
        Attack::StalledBody => (4, if args.quick { 4 } else { 8 }),
        _ => (1, 1),
    };
    AttackSize {
        duration: args.duration,
        connections,
        streams_per_connection,
        churn_total: if args.quick { 2_000 } else { 10_000 },
        churn_concurrency: 200,
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("abuse: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut failed = false;
    for &attack in &args.attacks {
        let honest = HonestClient::start(args.target);
        std::thread::sleep(args.duration.min(Duration::from_secs(2)));
        let before = counters(args.admin);
        // Resets the kernel's high-water mark of dn-sim's resident memory to its current size.
        let _ = std::fs::write(format!("/proc/{}/clear_refs", args.pid), "5");
        let rss_start = status_kib(args.pid, "VmRSS:") / 1024.0;
        honest.mark();
        let report = runtime.block_on(attacks::run(attack, args.target, size_of(attack, &args)));
        let peak = status_kib(args.pid, "VmHWM:") / 1024.0;
        honest.mark();
        std::thread::sleep(Duration::from_millis(100));
        let periods = honest.finish();
        let after = counters(args.admin);
        let (calm, attacked) = (&periods[0], &periods[1]);
        failed |= attacked.failed > 0;
        println!(
            "== {}: {} {} in {:.2} s = {:.0} {}/s sent, on {} connections",
            attack.name(),
            report.units,
            attack.unit(),
            report.elapsed.as_secs_f64(),
            report.rate(),
            attack.unit(),
            report.connections
        );
        // What dn-sim read, which a flood's sent count overstates: its writes fill the socket
        // buffers of connections the server has already ended.
        let delta = |name: &str| {
            after.get(name).copied().unwrap_or(0.0) - before.get(name).copied().unwrap_or(0.0)
        };
        let frames = |t: &str| {
            delta(&format!(
                "dn_sim_http2_frames_received_total{{type=\"{t}\"}}"
            ))
        };
        let (read, what) = match attack {
            Attack::RapidReset => (frames("RST_STREAM"), "RST_STREAM frames"),
            Attack::SettingsFlood => (frames("SETTINGS"), "SETTINGS frames"),
            Attack::PingFlood => (frames("PING"), "PING frames"),
            Attack::OversizeHeaders | Attack::StalledStreams | Attack::StalledBody => {
                // The honest calls from the first snapshot on: the attack's period and after.
                let honest: u64 = periods[1..].iter().map(|p| p.ok + p.failed).sum();
                let honest = honest as f64;
                (
                    frames("HEADERS") - honest,
                    "HEADERS frames (the honest client's taken off)",
                )
            }
            Attack::ConnectionChurn | Attack::BadPreface => (
                delta("dn_sim_connections_accepted_total"),
                "connections accepted",
            ),
        };
        println!(
            "   dn-sim read {read:.0} {what} = {:.0}/s",
            read / report.elapsed.as_secs_f64().max(1e-9)
        );
        println!("   honest before: {}", calm.summary());
        println!("   honest during: {}", attacked.summary());
        println!("   dn-sim RSS: {rss_start:.1} MiB at the start, peak {peak:.1} MiB during");
        println!("   attacker saw: {}", report.answers.summary());
        let moved: Vec<String> = after
            .iter()
            .filter_map(|(name, v)| {
                let delta = v - before.get(name).copied().unwrap_or(0.0);
                (delta != 0.0).then(|| format!("{name} {delta:+}"))
            })
            .collect();
        println!("   dn-sim metrics: {}", moved.join(", "));
    }
    if failed {
        println!("some honest calls failed during an attack");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
