//! The dn-sim that `loadgen calibrate --check-on COMMAND` checks a profile on: a process of its
//! own, started as a user (and `scripts/exp-twin.sh`'s validation) runs dn-sim, rather than the
//! server embedded in loadgen. Why: the check then prices the binary and flags that will run the
//! profile (a build of its own, HTTP/2 settings, allocator settings), and a loadgen built
//! without the embedded dn-sim can check too. On 2 cores the two measured alike (the 1 MiB
//! echo at one request in flight 11.21/11.25 ms in a process, 11.52/11.25 embedded).

use crate::error::Error;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How long the process may take to bind and write its ready file.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// How long it may take to end after SIGTERM before it is killed.
const END_WITHIN: Duration = Duration::from_secs(10);

/// A dn-sim process started by this one, on 127.0.0.1; ended (SIGTERM, by its PID) and its
/// scratch directory removed when dropped.
pub struct DnSimProcess {
    child: Child,
    addr: String,
    dir: PathBuf,
}

impl DnSimProcess {
    /// Starts `command` (the program, then arguments of the user's own) with `profile` (its
    /// TOML text), `pool` handlers, container `container_id`, its data discarded, on port 0,
    /// and waits until it serves.
    pub fn start(
        command: &[String],
        profile: &str,
        pool: u32,
        container_id: i64,
    ) -> Result<Self, Error> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let (program, own) = command
            .split_first()
            .ok_or_else(|| Error::Usage("calibrate: --check-on names no program".into()))?;
        let io = |what: &str, e: std::io::Error| Error::Io(format!("calibrate: {what}: {e}"));
        let dir = std::env::temp_dir().join(format!(
            "loadgen-check-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir.display().to_string(), e))?;
        let (profile_path, ready, log) = (
            dir.join("profile.toml"),
            dir.join("ready"),
            dir.join("stderr"),
        );
        let started = std::fs::write(&profile_path, profile)
            .map_err(|e| io(&profile_path.display().to_string(), e))
            .and_then(|()| {
                std::fs::File::create(&log).map_err(|e| io(&log.display().to_string(), e))
            })
            .and_then(|stderr| {
                Command::new(program)
                    .args(own)
                    .args(["--listen", "127.0.0.1:0", "--metrics-listen", "none"])
                    .args(["--ratis-listen", "none", "--store", "discard"])
                    .arg("--profile")
                    .arg(&profile_path)
                    .args(["--handler-count", &pool.to_string()])
                    .args(["--containers", &container_id.to_string()])
                    .arg("--ready-file")
                    .arg(&ready)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(stderr)
                    .spawn()
                    .map_err(|e| Error::Usage(format!("calibrate: --check-on {program}: {e}")))
            });
        let child = match started {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let mut process = Self {
            child,
            addr: String::new(),
            dir,
        };
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            // Written whole (to PATH.tmp, then renamed): a file there is complete.
            if let Ok(text) = std::fs::read_to_string(&ready)
                && let Some(addr) = text.lines().find_map(|l| l.strip_prefix("client "))
            {
                process.addr = addr.trim().to_string();
                return Ok(process);
            }
            let exited = process.child.try_wait().map_err(|e| io("--check-on", e))?;
            if exited.is_some() || Instant::now() > deadline {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                let last = said.lines().last().unwrap_or("(nothing on stderr)");
                let why = exited.map_or_else(
                    || format!("did not serve within {READY_WITHIN:?}"),
                    |s| format!("exited ({s}) before it served"),
                );
                return Err(Error::Run(format!(
                    "calibrate: --check-on {program} {why}: {last}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its client port's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }
}

impl Drop for DnSimProcess {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with the PID of a child this process started and has not reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + END_WITHIN;
        while matches!(self.child.try_wait(), Ok(None)) {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        ["sh", "-c", script, "sh"].map(String::from).to_vec()
    }

    #[test]
    fn a_process_that_writes_its_ready_file_serves_until_dropped() {
        // A stand-in for dn-sim: finds --ready-file and --profile among the arguments loadgen
        // added, writes the file whole (tmp, then rename) with its arguments, then waits.
        let script = r#"
            while [ $# -gt 0 ]; do
                case "$1" in --ready-file) ready=$2 ;; --profile) profile=$2 ;; esac
                shift
            done
            grep -q 'kind = "test"' "$profile" || exit 9
            printf 'client 127.0.0.1:4242\nadmin none\n' > "$ready.tmp" && mv "$ready.tmp" "$ready"
            exec sleep 60
        "#;
        let mut command = sh(script);
        command.push("--own-flag".into());
        let process = DnSimProcess::start(&command, "kind = \"test\"\n", 7, 3).unwrap();
        assert_eq!(process.addr(), "127.0.0.1:4242");
        let dir = process.dir.clone();
        assert!(dir.join("profile.toml").exists());
        let pid = process.child.id() as i32;
        drop(process);
        // Ended and reaped: the PID names no child of ours any more; the scratch gone.
        // SAFETY: waitpid on a PID this test's process started; it only reports.
        let reaped = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        assert_eq!(reaped, -1, "the child was not reaped");
        assert!(!dir.exists());
    }

    #[test]
    fn a_process_given_the_pool_and_container_passes_them_as_dn_sim_flags() {
        let script = r#"
            args="$*"
            while [ $# -gt 0 ]; do [ "$1" = --ready-file ] && ready=$2; shift; done
            printf 'client 127.0.0.1:1\nargs %s\n' "$args" > "$ready.tmp" && mv "$ready.tmp" "$ready"
            exec sleep 60
        "#;
        let process = DnSimProcess::start(&sh(script), "", 16, 5).unwrap();
        let ready = std::fs::read_to_string(process.dir.join("ready")).unwrap();
        for flags in [
            "--listen 127.0.0.1:0",
            "--store discard",
            "--handler-count 16",
            "--containers 5",
            "--metrics-listen none",
        ] {
            assert!(ready.contains(flags), "{flags} not in {ready}");
        }
    }

    #[test]
    fn a_process_that_exits_first_is_an_error_with_its_last_words() {
        let err = DnSimProcess::start(
            &sh("echo 'bad profile: no [machine]' >&2; exit 3"),
            "",
            1,
            1,
        )
        .err()
        .expect("an error");
        let said = err.to_string();
        assert!(matches!(err, Error::Run(_)), "{said}");
        assert!(
            said.contains("exited") && said.contains("bad profile: no [machine]"),
            "{said}"
        );
    }

    #[test]
    fn a_missing_program_or_none_is_a_usage_error_naming_the_flag() {
        for command in [vec!["/nonexistent/dn-sim".to_string()], vec![]] {
            let err = DnSimProcess::start(&command, "", 1, 1)
                .err()
                .expect("an error");
            assert!(matches!(err, Error::Usage(_)), "{err}");
            assert!(err.to_string().contains("--check-on"), "{err}");
        }
    }
}
