//! Starting and stopping the two targets of a configuration group.
//!
//! - real: `--real-cmd` is a shell command line; the runner appends `--containers LIST --info FILE`
//!   and `-D key=value` per config key, waits for the stdout line `datanode HOST:PORT` (after
//!   `ratis` and `pipeline` lines), then reads FILE (`datanode HOST:PORT`, `uuid UUID`,
//!   `http HOST:PORT`, …). It serves until its stdin closes or it gets SIGTERM.
//! - sim: `--sim-cmd` (plus `--sim-extra-args`) gets `--listen 127.0.0.1:0 --metrics-listen
//!   127.0.0.1:0 --ready-file FILE --containers LIST` when its `--help` lists `--ready-file`
//!   (dn-sim: it binds port 0 and is ready when FILE names the ports it got), else ports picked
//!   free, `--listen 127.0.0.1:P --metrics-listen 127.0.0.1:Q`, and it is ready when both accept
//!   connections; also the UUID and version flags when the binary has them, and `-D key=value`
//!   per config key.
//!
//! Each target runs in a process group of its own; stopping closes its stdin, sends SIGTERM to the
//! group, waits, and sends SIGKILL to the group only if it is still there. A `Process` dropped
//! without `stop` (an error, Ctrl-C) is killed the same way.

use crate::scenario::Config;
use anyhow::{Context as _, anyhow, bail};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdin, Command};

/// Where a target serves.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Endpoint {
    /// The client port, `HOST:PORT`.
    pub addr: String,
    /// The DataNode UUID (`$DN`).
    pub uuid: String,
    /// The HTTP port serving `/prom`, `HOST:PORT`.
    pub http: Option<String>,
    /// The Ratis client port, `HOST:PORT` (`ratis` scenarios).
    pub ratis: Option<String>,
    /// The pipeline whose Raft group the Ratis port hosts, with the containers (`$PIPELINE`).
    pub pipeline: Option<String>,
}

/// A started target.
pub struct Process {
    pub label: String,
    child: Child,
    pgid: i32,
    stdin: Option<ChildStdin>,
    pub log: PathBuf,
    /// The target's `TMPDIR`, removed once its whole process group is gone: what a target
    /// killed mid-shutdown leaves there (a real DataNode's mini cluster, ~600 MB) goes with it.
    scratch: Option<PathBuf>,
    stopped: bool,
}

/// How long a target has to exit after SIGTERM before it gets SIGKILL: above the harness's own
/// shutdown limit (30 s, after which it deletes its data and halts), so that a DataNode hung in
/// its shutdown is ended by the harness, which cleans up, rather than killed by us mid-way.
const STOP_GRACE: Duration = Duration::from_secs(45);

/// How long a SIGKILLed group may take to be gone before its scratch directory is removed.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Waits up to `limit` for every process of the group to be gone; whether they are.
async fn group_gone(pgid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while group_alive(pgid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    !group_alive(pgid)
}

/// [`group_gone`] for `Drop`, which cannot await.
fn group_gone_blocking(pgid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while group_alive(pgid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    !group_alive(pgid)
}

fn signal_group(pgid: i32, signal: i32) -> bool {
    // SAFETY: kill(2) with a negative pid signals the process group we created for this child.
    unsafe { libc::kill(-pgid, signal) == 0 }
}

/// Whether a process of the group is still running. Zombies do not count: an orphan's zombie
/// lingers until init reaps it, which some containers' init does late.
fn group_alive(pgid: i32) -> bool {
    if !signal_group(pgid, 0) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.filter_map(Result::ok).any(|entry| {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp …; comm may contain spaces and parentheses
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
        pgrp == Some(pgid) && state != Some("Z")
    })
}

impl Process {
    /// Closes stdin, SIGTERMs the process group and waits for it.
    pub async fn stop(mut self) {
        self.stopped = true;
        self.stdin.take();
        signal_group(self.pgid, libc::SIGTERM);
        let exited = tokio::time::timeout(STOP_GRACE, self.child.wait()).await;
        if exited.is_err() {
            eprintln!(
                "conformance: {} did not stop within {} s of SIGTERM; killing it",
                self.label,
                STOP_GRACE.as_secs()
            );
            signal_group(self.pgid, libc::SIGKILL);
            let _ = self.child.wait().await;
            group_gone(self.pgid, KILL_WAIT).await;
            self.remove_scratch();
            return;
        }
        // The leader is gone, but what it started may still be shutting down: the real
        // DataNode's JVM takes about 8 s after SIGTERM (a `sh -c` leader dies at once) and
        // removes its directories last; killed sooner it left ~600 MB behind each time.
        if !group_gone(self.pgid, STOP_GRACE).await {
            signal_group(self.pgid, libc::SIGKILL);
            group_gone(self.pgid, KILL_WAIT).await;
        }
        self.remove_scratch();
    }

    fn remove_scratch(&mut self) {
        if let Some(dir) = self.scratch.take()
            && let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("conformance: cannot remove {}: {e}", dir.display());
        }
    }

    /// The last `n` lines of the target's log.
    pub fn log_tail(&self, n: usize) -> String {
        log_tail(&self.log, n)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        self.stdin.take();
        if matches!(self.child.try_wait(), Ok(None)) || group_alive(self.pgid) {
            signal_group(self.pgid, libc::SIGTERM);
            // Shorter than `stop`'s grace: this is an error path, and the scratch directory
            // below goes whatever the target left in it.
            let deadline = Instant::now() + Duration::from_secs(10);
            while (matches!(self.child.try_wait(), Ok(None)) || group_alive(self.pgid))
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            if matches!(self.child.try_wait(), Ok(None)) || group_alive(self.pgid) {
                signal_group(self.pgid, libc::SIGKILL);
                let _ = self.child.start_kill();
                group_gone_blocking(self.pgid, KILL_WAIT);
            }
        }
        self.remove_scratch();
    }
}

fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A shell command line with arguments appended (quoted by the shell itself, via `"$@"`).
fn shell(command_line: &str, name: &str, args: &[String]) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("{command_line} \"$@\""))
        .arg(name)
        .args(args);
    cmd
}

fn spawn(mut cmd: Command, label: &str, log: &Path) -> anyhow::Result<Process> {
    let log_file =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file))
        .process_group(0);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start the {label}"))?;
    let pgid = child.id().map(|id| id as i32).unwrap_or(0);
    let stdin = child.stdin.take();
    Ok(Process {
        label: label.to_string(),
        child,
        pgid,
        stdin,
        log: log.to_path_buf(),
        scratch: None,
        stopped: false,
    })
}

/// Copies a child's stdout into its log (so its pipe never fills up).
fn drain_into_log(
    out: impl AsyncRead + Unpin + Send + 'static,
    log: PathBuf,
    prefix: &'static str,
) {
    tokio::spawn(async move {
        use std::io::Write as _;
        let mut lines = BufReader::new(out).lines();
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).ok();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(f) = file.as_mut() {
                let _ = writeln!(f, "{prefix}{line}");
            }
        }
    });
}

fn config_args(config: &Config) -> Vec<String> {
    config
        .iter()
        .flat_map(|(k, v)| ["-D".to_string(), format!("{k}={v}")])
        .collect()
}

/// Starts the real DataNode: see the module docs.
pub async fn start_real(
    command_line: &str,
    containers: &str,
    config: &Config,
    work: &Path,
    index: usize,
    timeout: Duration,
) -> anyhow::Result<(Endpoint, Process)> {
    let info = work.join(format!("real-{index}.info"));
    let log = work.join(format!("real-{index}.log"));
    let _ = std::fs::remove_file(&info);
    let mut args = vec![
        "--containers".to_string(),
        containers.to_string(),
        "--info".to_string(),
        info.display().to_string(),
    ];
    args.extend(config_args(config));
    // The harness scripts make their scratch directory under $TMPDIR; one of ours, so that
    // nothing of it outlives the run even if the DataNode has to be killed.
    let scratch = work.join(format!("real-{index}.tmp"));
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    let mut command = shell(command_line, "real-datanode", &args);
    command.env("TMPDIR", &scratch);
    let mut process = spawn(command, "real DataNode", &log)?;
    process.scratch = Some(scratch);
    let stdout = process.child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let deadline = tokio::time::Instant::now() + timeout;
    let addr = loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(line)) => {
                    if let Some(addr) = line.trim().strip_prefix("datanode ") {
                        break addr.trim().to_string();
                    }
                    // The Ratis port and pipeline lines that come first.
                    if line.starts_with("ratis ") || line.starts_with("pipeline ") {
                        continue;
                    }
                    eprintln!("conformance: real DataNode: {line}");
                }
                Ok(None) | Err(_) => {
                    let status = process.child.wait().await.ok();
                    // The harness's own verdict (`real-datanode: failed…`) last, where a reader
                    // of only the end sees it, however much shutdown noise came after it.
                    let verdict: Vec<String> = std::fs::read_to_string(&log)
                        .unwrap_or_default()
                        .lines()
                        .filter(|l| l.starts_with("real-datanode: failed"))
                        .map(str::to_string)
                        .collect();
                    bail!(
                        "the real DataNode exited before it was ready ({}); {}:\n{}\n{}",
                        status.map_or("unknown status".into(), |s| s.to_string()),
                        log.display(),
                        process.log_tail(20),
                        verdict.join("\n")
                    );
                }
            },
            _ = tokio::time::sleep_until(deadline) => {
                bail!(
                    "the real DataNode printed no `datanode HOST:PORT` line within {} s; {}:\n{}",
                    timeout.as_secs(),
                    log.display(),
                    process.log_tail(20)
                );
            }
        }
    };
    drain_into_log(lines.into_inner(), log.clone(), "stdout: ");
    let endpoint = read_info(&info, &addr).await?;
    Ok((endpoint, process))
}

/// Reads the `--info` file a real DataNode script wrote (it may still be being written).
async fn read_info(info: &Path, addr: &str) -> anyhow::Result<Endpoint> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(info).unwrap_or_default();
        let mut endpoint = Endpoint {
            addr: addr.to_string(),
            uuid: String::new(),
            http: None,
            ratis: None,
            pipeline: None,
        };
        for line in text.lines() {
            match line.trim().split_once(char::is_whitespace) {
                Some(("datanode", a)) => endpoint.addr = a.trim().to_string(),
                Some(("uuid", u)) => endpoint.uuid = u.trim().to_string(),
                Some(("http", h)) => endpoint.http = Some(h.trim().to_string()),
                Some(("ratis", r)) => endpoint.ratis = Some(r.trim().to_string()),
                Some(("pipeline", p)) => endpoint.pipeline = Some(p.trim().to_string()),
                _ => {}
            }
        }
        if !endpoint.uuid.is_empty() {
            return Ok(endpoint);
        }
        if Instant::now() > deadline {
            bail!("{} has no `uuid UUID` line", info.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Two free ports on 127.0.0.1 (bound, then released).
pub fn free_ports() -> anyhow::Result<(u16, u16)> {
    let a = std::net::TcpListener::bind("127.0.0.1:0")?;
    let b = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

/// A random UUID (version 4) from the kernel.
pub fn new_uuid() -> String {
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/uuid") {
        let s = s.trim();
        if crate::normalize::is_uuid(s) {
            return s.to_string();
        }
    }
    use sha2::Digest as _;
    let seed = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let h = sha2::Sha256::digest(seed.as_bytes());
    let hex: String = h[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// Whether `command_line --help` mentions `flag` (true when the help cannot be read at all, so
/// a wrapper without `--help` still gets the flag).
pub async fn help_mentions(command_line: &str, flag: &str) -> bool {
    let mut cmd = shell(command_line, "dn-sim", &["--help".to_string()]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    match tokio::time::timeout(Duration::from_secs(60), cmd.output()).await {
        Ok(Ok(out)) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if out.status.success() && !text.trim().is_empty() {
                text.split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[')
                    .any(|w| w == flag)
            } else {
                true
            }
        }
        _ => true,
    }
}

/// What dn-sim gets beyond its ports and containers.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub command_line: String,
    pub extra_args: String,
    /// The UUID flag, when the binary has it.
    pub uuid_flag: Option<String>,
    /// The version flag, when the binary has it.
    pub version_flag: Option<String>,
    /// The binary has `--ready-file` (dn-sim's): it binds port 0 and reports the ports it got,
    /// so none is guessed. Without it, ports are picked free and handed over.
    pub ready_file: bool,
    /// The binary has `--pipeline-id`: it gets a new pipeline, named in `$PIPELINE`.
    pub pipeline_flag: bool,
    pub ozone_version: String,
}

/// Starts dn-sim: see the module docs.
pub async fn start_sim(
    options: &SimOptions,
    containers: &str,
    config: &Config,
    work: &Path,
    index: usize,
    timeout: Duration,
) -> anyhow::Result<(Endpoint, Process)> {
    let log = work.join(format!("sim-{index}.log"));
    let ready = work.join(format!("sim-{index}.ready"));
    let _ = std::fs::remove_file(&ready);
    let (mut addr, mut http) = if options.ready_file {
        ("127.0.0.1:0".to_string(), "127.0.0.1:0".to_string())
    } else {
        let (port, http_port) = free_ports()?;
        (
            format!("127.0.0.1:{port}"),
            format!("127.0.0.1:{http_port}"),
        )
    };
    let uuid = new_uuid();
    let pipeline = options.pipeline_flag.then(new_uuid);
    let mut args = vec![
        "--listen".to_string(),
        addr.clone(),
        "--metrics-listen".to_string(),
        http.clone(),
        "--containers".to_string(),
        containers.to_string(),
    ];
    if options.ready_file {
        args.extend(["--ready-file".to_string(), ready.display().to_string()]);
    }
    if let Some(flag) = &options.uuid_flag {
        args.extend([flag.clone(), uuid.clone()]);
    }
    if let Some(flag) = &options.version_flag {
        args.extend([flag.clone(), options.ozone_version.clone()]);
    }
    if let Some(p) = &pipeline {
        args.extend(["--pipeline-id".to_string(), p.clone()]);
    }
    args.extend(config_args(config));
    let line = if options.extra_args.trim().is_empty() {
        options.command_line.clone()
    } else {
        format!("{} {}", options.command_line, options.extra_args)
    };
    let mut process = spawn(shell(&line, "dn-sim", &args), "dn-sim", &log)?;
    let stdout = process.child.stdout.take().expect("stdout is piped");
    drain_into_log(stdout, log.clone(), "stdout: ");
    let deadline = Instant::now() + timeout;
    let mut ratis = None;
    loop {
        if let Ok(Some(status)) = process.child.try_wait() {
            bail!(
                "dn-sim exited before it was ready ({status}); {}:\n{}",
                log.display(),
                process.log_tail(20)
            );
        }
        if options.ready_file {
            // Written whole (renamed into place) once every listener is bound.
            if let Ok(text) = std::fs::read_to_string(&ready) {
                let line = |key: &str| {
                    text.lines()
                        .find_map(|l| l.strip_prefix(key))
                        .map(|a| a.trim().to_string())
                };
                match (line("client "), line("admin ")) {
                    (Some(c), Some(a)) => {
                        (addr, http) = (c, a);
                        ratis = line("ratis ");
                        break;
                    }
                    _ => bail!("dn-sim's ready file lacks a client or admin line: {text}"),
                }
            }
        } else {
            let client = tokio::net::TcpStream::connect(&addr).await;
            let admin = tokio::net::TcpStream::connect(&http).await;
            if client.is_ok() && admin.is_ok() {
                break;
            }
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "dn-sim did not accept connections on {addr} within {} s; {}:\n{}",
                timeout.as_secs(),
                log.display(),
                process.log_tail(20)
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((
        Endpoint {
            addr,
            uuid,
            http: Some(http),
            ratis,
            pipeline,
        },
        process,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_and_ports() {
        let u = new_uuid();
        assert!(crate::normalize::is_uuid(&u), "{u}");
        assert_ne!(u, new_uuid());
        let (a, b) = free_ports().unwrap();
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn help_detection() {
        assert!(
            help_mentions(
                "printf 'usage: x --datanode-uuid <U>\\n' #",
                "--datanode-uuid"
            )
            .await
        );
        assert!(!help_mentions("printf 'usage: x --listen\\n' #", "--datanode-uuid").await);
        // no usable help: assume the flag exists
        assert!(help_mentions("false", "--datanode-uuid").await);
    }

    #[tokio::test]
    async fn a_real_script_that_dies_early_is_reported_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let err = start_real(
            "echo starting >&2; exit 3; :",
            "1-3",
            &Config::new(),
            dir.path(),
            0,
            Duration::from_secs(10),
        )
        .await
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("exited before it was ready"), "{err}");
        assert!(err.contains("starting"), "{err}");
        assert!(!dir.path().join("real-0.tmp").exists());
    }

    #[tokio::test]
    async fn a_real_script_is_started_read_and_stopped() {
        let dir = tempfile::tempdir().unwrap();
        // A stand-in that follows the protocol: parses --info, writes it, prints the line, waits
        // for stdin to close.
        let script = r#"while [ $# -gt 0 ]; do case "$1" in --info) info="$2"; shift;; esac; shift; done;
            mkdir "${TMPDIR:?}/cluster" && echo data > "$TMPDIR/cluster/block";
            printf 'datanode 127.0.0.1:1\nuuid 3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab\nhttp 127.0.0.1:2\n' > "$info";
            echo 'datanode 127.0.0.1:1'; cat > /dev/null; :"#;
        let mut config = Config::new();
        config.insert("k".into(), "v".into());
        let (endpoint, process) = start_real(
            script,
            "1-3",
            &config,
            dir.path(),
            0,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(
            endpoint,
            Endpoint {
                addr: "127.0.0.1:1".into(),
                uuid: "3f2b8c1e-9a4d-4e1b-8f0a-1234567890ab".into(),
                http: Some("127.0.0.1:2".into()),
                ratis: None,
                pipeline: None,
            }
        );
        // What the target wrote under its TMPDIR is in the run's work directory, and goes
        // with the target.
        let scratch = dir.path().join("real-0.tmp");
        assert!(scratch.join("cluster/block").is_file());
        let pgid = process.pgid;
        process.stop().await;
        assert!(!group_alive(pgid));
        assert!(!scratch.exists());
    }
}
