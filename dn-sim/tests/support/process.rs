//! A `dn-sim` binary run as a child process on loopback ports it binds itself (port 0, read back
//! from its `--ready-file`), for tests that measure what
//! the server process costs (its resident memory from `/proc`), read its metrics over HTTP, or
//! kill and restart it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Polls `cond` (every 10 ms) until it returns Some or `deadline` passes: the value, or None
/// at the deadline. The way a test waits for something to happen, instead of sleeping and hoping.
pub fn wait_until<T>(deadline: Instant, mut cond: impl FnMut() -> Option<T>) -> Option<T> {
    loop {
        if let Some(v) = cond() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A running `dn-sim`; killed (SIGKILL) and reaped when dropped.
pub struct DnSimProcess {
    child: Option<Child>,
    args: Vec<String>,
    /// The client port (XceiverClientProtocolService).
    pub addr: SocketAddr,
    /// `/prom`, `/metrics`, `/config`.
    pub admin: SocketAddr,
    /// Holds the `--ready-file` of each start.
    dir: tempfile::TempDir,
}

/// The `client` and `admin` addresses a `dn-sim --ready-file` wrote, once the file exists
/// (it is renamed into place whole); None while it does not.
pub fn read_ready_file(path: &Path) -> Option<(SocketAddr, Option<SocketAddr>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .map(|a| {
                a.parse::<SocketAddr>()
                    .expect("an address in the ready file")
            })
    };
    Some((field("client")?, field("admin")))
}

impl DnSimProcess {
    /// Starts `dn-sim --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --ready-file F ARGS`
    /// and waits (up to 30 s) for F, which holds the ports the kernel chose.
    pub fn spawn(args: &[&str]) -> Self {
        let unbound: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let mut process = Self {
            child: None,
            args: args.iter().map(|a| a.to_string()).collect(),
            addr: unbound,
            admin: unbound,
            dir: tempfile::tempdir().unwrap(),
        };
        process.start();
        process
    }

    fn start(&mut self) {
        let ready = self.dir.path().join("ready");
        let _ = std::fs::remove_file(&ready);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dn-sim"));
        // The test's own environment must not leak settings into the child.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("DN_SIM_") || name.starts_with("OZONE-SITE.XML_") {
                cmd.env_remove(&*name);
            }
        }
        cmd.env("NO_COLOR", "1")
            .env("RUST_LOG", "warn")
            .arg("--listen")
            .arg(self.addr.to_string())
            .arg("--metrics-listen")
            .arg(self.admin.to_string())
            // Port 0 always: a restart reuses the client port, and the Ratis ports would follow
            // it to a fixed 9858 and 9857.
            .arg("--ratis-listen")
            .arg("127.0.0.1:0")
            .arg("--ratis-admin-listen")
            .arg("127.0.0.1:0")
            .arg("--ready-file")
            .arg(&ready)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        self.child = Some(cmd.spawn().expect("spawning dn-sim"));
        let deadline = Instant::now() + Duration::from_secs(30);
        let child = self.child.as_mut().unwrap();
        let (addr, admin) = wait_until(deadline, || {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("dn-sim {:?} exited before serving: {status}", self.args);
            }
            read_ready_file(&ready)
        })
        .unwrap_or_else(|| panic!("dn-sim {:?} wrote no ready file within 30 s", self.args));
        // A restart binds the same ports again.
        self.addr = addr;
        self.admin = admin.expect("an admin address in the ready file");
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("dn-sim is running").id()
    }

    /// A `VmXXX:` line of `/proc/PID/status`, in KiB.
    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc/PID/status"))
    }

    /// Resident memory now, MiB.
    pub fn rss_mib(&self) -> f64 {
        self.status_kib("VmRSS:") as f64 / 1024.0
    }

    /// The most memory ever resident (the kernel's high-water mark), MiB.
    pub fn peak_rss_mib(&self) -> f64 {
        self.status_kib("VmHWM:") as f64 / 1024.0
    }

    /// Resets the high-water mark to the current resident size, so that `peak_rss_mib` measures
    /// only what comes after (`/proc/PID/clear_refs`, value 5).
    pub fn reset_peak(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").unwrap();
    }

    /// `GET PATH` on the admin listener; the body.
    pub fn http_get(&self, path: &str) -> String {
        let mut stream = TcpStream::connect(self.admin).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n",
            self.admin
        )
        .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        match text.split_once("\r\n\r\n") {
            Some((_, body)) => body.to_string(),
            None => text,
        }
    }

    /// The value of the first sample of `name` (with any labels) in `/metrics`, if present.
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.http_get("/metrics").lines().find_map(|line| {
            let rest = line.strip_prefix(name)?;
            if !(rest.starts_with(' ') || rest.starts_with('{')) {
                return None;
            }
            line.rsplit(' ').next()?.parse().ok()
        })
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// SIGKILL, then reap: no shutdown code runs, as after a crash or power loss of the process.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the process and starts it again with the same arguments and ports.
    pub fn restart(&mut self) {
        self.kill();
        self.start();
    }
}

impl Drop for DnSimProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A path's text for a command-line argument.
pub fn arg(path: &Path) -> String {
    path.to_str().expect("a UTF-8 path").to_string()
}
