//! No acknowledged data lost: dn-sim with `--store dir:` is killed with SIGKILL in the middle of
//! `loadgen write --manifest` runs (several containers, several workers each), started again on
//! the same directory, and every block of the manifests — each line a PutBlock dn-sim
//! acknowledged — is read back byte for byte with `loadgen read --manifest`. Also: a clean
//! restart keeps container states, `bytesUsed` and `blockCount` (ReadContainer), and
//! `--containers` does not reset existing containers.
//!
//! dn-sim runs as a child process that this test binary starts from itself: Cargo builds only
//! loadgen's own binaries for loadgen's tests, so the child is this executable re-run with
//! [`CHILD_ARGS`] set, and the test it is told to run turns at once into dn-sim — the dn-sim
//! binary's code path (`dn_sim::cli::Cli` → `run_until_signal`) from the library loadgen
//! already links. The writers and readers are the real `loadgen` binary.

use clap::Parser;
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{
    CloseContainerRequestProto, ContainerCommandRequestProto as Req,
    ContainerCommandResponseProto as Resp, ContainerDataProto, ReadContainerRequestProto,
    Result as OzoneResult, Type,
};
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Set in a child: the dn-sim arguments, one per line.
const CHILD_ARGS: &str = "LOADGEN_CRASH_TEST_DN_SIM_ARGS";

/// In a child started by [`DnSim`], becomes dn-sim and never returns; otherwise does nothing.
fn become_dn_sim_if_child() {
    let Ok(args) = std::env::var(CHILD_ARGS) else {
        return;
    };
    let argv = std::iter::once("dn-sim".to_string()).chain(args.lines().map(str::to_string));
    let code = match dn_sim::cli::Cli::try_parse_from(argv).map(|c| c.into_command()) {
        Ok(dn_sim::cli::Command::Serve(args)) => match args.config() {
            Ok(config) => {
                let runtime = tokio::runtime::Runtime::new().unwrap();
                let ready = args.ready_file.as_deref();
                match runtime.block_on(dn_sim::run_until_signal(config, ready)) {
                    Ok(()) => 0,
                    Err(e) => {
                        eprintln!("dn-sim: {e:#}");
                        2
                    }
                }
            }
            Err(e) => {
                eprintln!("dn-sim: error: {e}");
                2
            }
        },
        Ok(_) => 2,
        Err(e) => {
            eprintln!("dn-sim: {e}");
            2
        }
    };
    std::process::exit(code);
}

/// A dn-sim child process on a loopback port; SIGKILLed when dropped. Its first start binds
/// port 0 and writes the port it got to a ready file; a restart listens on that port again, as
/// a DataNode restarts on its configured port.
struct DnSim {
    child: Option<Child>,
    test: &'static str,
    args: Vec<String>,
    /// `127.0.0.1:0` until the first start has reported its port.
    addr: SocketAddr,
    ready_file: PathBuf,
}

impl DnSim {
    /// Starts dn-sim with `args` (plus `--listen`, no HTTP listener) from the test `test` (the
    /// name of the calling test: the child runs it, and it turns into dn-sim).
    fn spawn(test: &'static str, args: &[&str]) -> Self {
        let ready_file =
            std::env::temp_dir().join(format!("loadgen-crash-{}-{test}.ready", std::process::id()));
        let mut dn = Self {
            child: None,
            test,
            args: args.iter().map(|a| a.to_string()).collect(),
            addr: "127.0.0.1:0".parse().unwrap(),
            ready_file,
        };
        dn.start();
        dn
    }

    fn start(&mut self) {
        let _ = std::fs::remove_file(&self.ready_file);
        let mut args = vec![
            "--listen".to_string(),
            self.addr.to_string(),
            "--metrics-listen".to_string(),
            "none".to_string(),
            // A restart reuses the client port; the Ratis port would be a fixed 9858 then.
            "--ratis-listen".to_string(),
            "none".to_string(),
            "--ready-file".to_string(),
            arg(&self.ready_file),
        ];
        args.extend(self.args.iter().cloned());
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("DN_SIM_") || name.starts_with("OZONE-SITE.XML_") {
                cmd.env_remove(&*name);
            }
        }
        cmd.args([self.test, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ARGS, args.join("\n"))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        self.child = Some(cmd.spawn().expect("starting the dn-sim child"));
        let deadline = Instant::now() + Duration::from_secs(30);
        let ready = loop {
            if let Ok(text) = std::fs::read_to_string(&self.ready_file) {
                break text;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("dn-sim {:?} exited before serving: {status}", self.args);
            }
            assert!(Instant::now() < deadline, "dn-sim wrote no ready file");
            std::thread::sleep(Duration::from_millis(20));
        };
        self.addr = ready
            .lines()
            .find_map(|l| l.strip_prefix("client "))
            .expect("a client line")
            .parse()
            .expect("a socket address");
    }

    fn target(&self) -> String {
        self.addr.to_string()
    }

    /// SIGKILL and reap: no shutdown code runs.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM: dn-sim's own shutdown; waits for the exit and asserts it was clean.
    fn stop(&mut self) {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill(2) with our own child's PID and a valid signal number.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        let status = child.wait().unwrap();
        assert!(status.success(), "dn-sim stopped with {status}");
    }

    fn restart(&mut self) {
        self.kill();
        self.start();
    }
}

impl Drop for DnSim {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.ready_file);
    }
}

fn arg(path: &Path) -> String {
    path.to_str().expect("a UTF-8 path").to_string()
}

/// Lines of a manifest after its header: blocks committed.
fn blocks_in(manifest: &Path) -> usize {
    match std::fs::File::open(manifest) {
        Ok(f) => std::io::BufReader::new(f).lines().count().saturating_sub(1),
        Err(_) => 0,
    }
}

/// Small blocks (4 chunks of 16 KB, a PutBlock each 32 KB and at the end), so that a run
/// commits hundreds of blocks in a few seconds.
const SHAPE: [&str; 10] = [
    "--write-size",
    "16KB",
    "--chunk-size",
    "16KB",
    "--bytes-per-checksum",
    "4KB",
    "--block-size",
    "64KB",
    "--flush-size",
    "32KB",
];

/// `loadgen write` of container `container` with `threads` workers for up to 60 s.
fn start_writer(target: &str, container: i64, threads: u32, manifest: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["write", "--target", target, "--duration", "60s"])
        .args(["--container-id", &container.to_string()])
        .args(["-t", &threads.to_string(), "--manifest", &arg(manifest)])
        .args(SHAPE)
        .args(["--format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting loadgen write")
}

/// `loadgen read --manifest`; its JSON report.
fn read_back(target: &str, manifest: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["read", "--target", target, "-t", "4", "--manifest"])
        .arg(manifest)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "read --manifest {}: {e}: {}",
            manifest.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        out.status.success(),
        "read --manifest {}: {}\nerrors: {}, read: {}",
        manifest.display(),
        String::from_utf8_lossy(&out.stderr),
        report["errors"],
        report["read"]
    );
    report
}

/// Writers on `containers` (2 workers each) until the manifests list `at_least` blocks, then
/// SIGKILL of dn-sim in the middle of the writes, a restart on the same directory, and every
/// block of every manifest read back and verified.
fn kill_during_writes_then_read_back(test: &'static str, sync: bool) {
    become_dn_sim_if_child();
    let tmp = tempfile::tempdir().unwrap();
    let data = format!("dir:{}", arg(&tmp.path().join("data")));
    let mut args = vec!["--store", &data, "--containers", "1-3", "--capacity", "4GB"];
    if sync {
        args.push("--sync");
    }
    let mut dn = DnSim::spawn(test, &args);
    let containers = [1i64, 2, 3];
    let manifests: Vec<PathBuf> = containers
        .iter()
        .map(|c| tmp.path().join(format!("blocks-{c}.jsonl")))
        .collect();
    let mut writers: Vec<Child> = containers
        .iter()
        .zip(&manifests)
        .map(|(c, m)| start_writer(&dn.target(), *c, 2, m))
        .collect();
    let at_least = 300;
    let deadline = Instant::now() + Duration::from_secs(60);
    while manifests.iter().map(|m| blocks_in(m)).sum::<usize>() < at_least {
        assert!(
            Instant::now() < deadline,
            "the writers never committed {at_least} blocks"
        );
        for w in &mut writers {
            assert!(w.try_wait().unwrap().is_none(), "a writer ended early");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    dn.kill();
    // Without dn-sim each writer fails and ends (no -f: the first failure stops the run).
    let deadline = Instant::now() + Duration::from_secs(30);
    for w in &mut writers {
        loop {
            if let Some(status) = w.try_wait().unwrap() {
                assert!(
                    !status.success(),
                    "a writer's run cannot succeed without its target"
                );
                break;
            }
            if Instant::now() > deadline {
                let _ = w.kill();
                panic!("a writer did not end after dn-sim was killed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let acknowledged: Vec<usize> = manifests.iter().map(|m| blocks_in(m)).collect();
    eprintln!("{test}: {acknowledged:?} blocks acknowledged before the SIGKILL");
    assert!(
        acknowledged.iter().sum::<usize>() >= at_least,
        "{acknowledged:?}"
    );
    assert!(acknowledged.iter().all(|&n| n > 0), "{acknowledged:?}");

    dn.start();
    for ((manifest, blocks), c) in manifests.iter().zip(&acknowledged).zip(containers) {
        // A block is in the manifest once its last PutBlock was acknowledged; blockCount also
        // counts blocks that had only their first PutBlocks then.
        let data = read_container(&dn.target(), c);
        assert!(
            data.block_count >= Some(*blocks as i64),
            "{data:?}: {blocks} acknowledged"
        );
        let report = read_back(&dn.target(), manifest);
        let read = &report["read"];
        assert_eq!(read["blocks"], *blocks as u64, "{read}");
        assert_eq!(
            read["bytes_verified"],
            (*blocks as u64) * 64 * 1024,
            "{read}"
        );
        assert_eq!(report["integrity_errors"], 0, "{}", report["errors"]);
    }
}

#[test]
fn sigkill_with_sync_loses_no_acknowledged_block() {
    kill_during_writes_then_read_back("sigkill_with_sync_loses_no_acknowledged_block", true);
}

#[test]
fn sigkill_without_sync_keeps_what_reached_the_kernel() {
    kill_during_writes_then_read_back("sigkill_without_sync_keeps_what_reached_the_kernel", false);
}

/// One request on a new client; its answer.
fn call(target: &str, req: Req) -> Resp {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let channel = Channel::from_shared(format!("http://{target}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = Client::new(channel);
        let mut inbound = client
            .send(tokio_stream::once(req))
            .await
            .unwrap()
            .into_inner();
        inbound.message().await.unwrap().expect("one response")
    })
}

fn request(cmd: Type, container: i64) -> Req {
    Req {
        cmd_type: cmd as i32,
        container_id: container,
        datanode_uuid: "crash-test".into(),
        ..Default::default()
    }
}

fn read_container(target: &str, container: i64) -> ContainerDataProto {
    let resp = call(
        target,
        Req {
            read_container: Some(ReadContainerRequestProto {}),
            ..request(Type::ReadContainer, container)
        },
    );
    assert_eq!(
        resp.result,
        OzoneResult::Success as i32,
        "{:?}",
        resp.message
    );
    resp.read_container
        .expect("a ReadContainer answer")
        .container_data
        .expect("container data")
}

#[test]
fn a_clean_restart_keeps_containers_states_and_counters() {
    become_dn_sim_if_child();
    let tmp = tempfile::tempdir().unwrap();
    let data = format!("dir:{}", arg(&tmp.path().join("data")));
    let mut dn = DnSim::spawn(
        "a_clean_restart_keeps_containers_states_and_counters",
        &["--store", &data, "--containers", "1-2"],
    );
    let manifests: Vec<PathBuf> = [1, 2]
        .iter()
        .map(|c| tmp.path().join(format!("blocks-{c}.jsonl")))
        .collect();
    for (c, m) in [1i64, 2].iter().zip(&manifests) {
        let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
            .args(["write", "--target", &dn.target(), "-n", "40", "-t", "2"])
            .args(["--container-id", &c.to_string(), "--manifest", &arg(m)])
            .args(SHAPE)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let close = Req {
        close_container: Some(CloseContainerRequestProto {}),
        ..request(Type::CloseContainer, 2)
    };
    assert_eq!(
        call(&dn.target(), close).result,
        OzoneResult::Success as i32
    );
    let before: Vec<ContainerDataProto> = [1, 2]
        .iter()
        .map(|c| read_container(&dn.target(), *c))
        .collect();
    // 40 writes of 16 KB per container, in blocks of up to 64 KB, each in the manifest.
    let blocks: Vec<usize> = manifests.iter().map(|m| blocks_in(m)).collect();
    for (c, n) in before.iter().zip(&blocks) {
        assert!(*n >= 10, "{blocks:?}");
        assert_eq!(c.block_count, Some(*n as i64), "{c:?}");
        assert_eq!(c.bytes_used, Some(40 * 16 * 1024), "{c:?}");
    }
    assert_eq!(
        before[0].state,
        Some(common::proto::container_data_proto::State::Open as i32)
    );
    assert_eq!(
        before[1].state,
        Some(common::proto::container_data_proto::State::Closed as i32)
    );

    dn.stop();
    dn.args = ["--store", &data, "--containers", "1-3"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    dn.start();
    for (c, was) in [1, 2].iter().zip(&before) {
        assert_eq!(read_container(&dn.target(), *c), *was, "container {c}");
    }
    let added = read_container(&dn.target(), 3);
    assert_eq!(added.block_count, Some(0));
    assert_eq!(
        added.state,
        Some(common::proto::container_data_proto::State::Open as i32)
    );
    for (m, n) in manifests.iter().zip(&blocks) {
        let report = read_back(&dn.target(), m);
        assert_eq!(report["read"]["blocks"], *n as u64, "{}", report["read"]);
    }
    // A second restart, after a SIGKILL this time, changes nothing either.
    dn.restart();
    for (c, was) in [1, 2].iter().zip(&before) {
        assert_eq!(read_container(&dn.target(), *c), *was, "container {c}");
    }
}
