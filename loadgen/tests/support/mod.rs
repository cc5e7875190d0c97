//! Helpers shared by loadgen's integration tests (`mod support;` in each test crate).
#![allow(dead_code)] // each test crate uses its share

use clap::Parser;
use loadgen::cli::Cli;
use std::process::Command;

/// Runs the loadgen binary with `args` and asserts what a bad command line gets: exit code 2,
/// nothing on stdout, one line on stderr that contains `needle` (the flag or value at fault),
/// and no panic.
pub fn assert_usage_error(args: &[&str], needle: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: one line, got {stderr}"
    );
    assert!(
        stderr.contains(needle),
        "{args:?}: '{needle}' not in {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(stdout.is_empty(), "{args:?}: {stdout}");
}

/// `loadgen write …` or `loadgen read …` (any run) in this process.
pub fn run_block(args: &[&str]) -> loadgen::Summary {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).expect("valid flags");
    loadgen::run(cli).expect("the run starts")
}

/// A dn-sim on 127.0.0.1:0 (or `listen`) with these `--fault` specs and a fixed seed.
pub fn dn_sim_with(
    faults: &[&str],
    listen: Option<std::net::SocketAddr>,
) -> dn_sim::EmbeddedServer {
    let mut config = dn_sim::Config::loopback();
    if let Some(addr) = listen {
        config.listen = addr;
    }
    config.seed = 42;
    config.shutdown_grace = std::time::Duration::from_millis(200);
    config.live = dn_sim::sim::admission::LiveSettings {
        faults: dn_sim::sim::fault::FaultPlan::from_args(faults).expect("valid faults"),
        ..dn_sim::sim::admission::LiveSettings::default()
    };
    dn_sim::EmbeddedServer::start(config, 1).expect("dn-sim starts")
}

/// The count of errors of `kind`, if any.
pub fn errors_of(s: &loadgen::Summary, kind: &str) -> Option<u64> {
    s.results.errors.get(kind).map(|e| e.count)
}

/// What a loadgen process printed and returned after [`sigint_after_first_progress`].
pub struct Interrupted {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From the SIGINT to the exit.
    pub stopping: std::time::Duration,
}

/// Runs the loadgen binary with `args`, waits (up to `wait`) for its first progress line, so
/// that the run and its signal handler are going, sends it SIGINT and collects what it prints.
pub fn sigint_after_first_progress(args: &[&str], wait: std::time::Duration) -> Interrupted {
    use std::io::{BufRead, Read};
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with("Progress:") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if rx.recv_timeout(wait).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "no progress line within {wait:?}:\n{}",
            reader.join().unwrap()
        );
    }
    let started = std::time::Instant::now();
    // SAFETY: sends SIGINT to the child this function spawned.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    Interrupted {
        status,
        stdout,
        stderr: reader.join().unwrap(),
        stopping: started.elapsed(),
    }
}

/// A loadgen binary run with live metrics on port 0: the address it bound is read from its
/// stderr line `loadgen: metrics on http://ADDR/metrics`, never guessed beforehand.
pub struct LiveRun {
    child: std::process::Child,
    stderr: std::sync::mpsc::Receiver<String>,
    /// Where its Prometheus endpoint listens.
    pub metrics: std::net::SocketAddr,
}

impl LiveRun {
    /// Starts `loadgen ARGS --metrics-listen 127.0.0.1:0` and waits (10 s at most) for the
    /// metrics address.
    pub fn start(args: &[&str]) -> LiveRun {
        use std::io::BufRead as _;
        let mut child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
            .args(args)
            .args(["--metrics-listen", "127.0.0.1:0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("starting loadgen");
        let (tx, stderr) = std::sync::mpsc::channel();
        let pipe = std::io::BufReader::new(child.stderr.take().unwrap());
        // Drained to the end so that loadgen never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in pipe.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut seen = String::new();
        let metrics = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = stderr
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("loadgen {args:?} named no metrics address: {seen}"));
            if let Some(addr) = line
                .strip_prefix("loadgen: metrics on http://")
                .and_then(|rest| rest.strip_suffix("/metrics"))
            {
                break addr.parse().expect("a socket address");
            }
            seen.push_str(&line);
            seen.push('\n');
        };
        LiveRun {
            child,
            stderr,
            metrics,
        }
    }

    /// Whether loadgen has exited.
    pub fn is_finished(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    /// Waits for the exit and asserts it succeeded.
    pub fn finish(mut self) {
        let status = self.child.wait().unwrap();
        let stderr: Vec<String> = self.stderr.try_iter().collect();
        assert!(status.success(), "loadgen: {status}: {}", stderr.join("\n"));
    }
}
