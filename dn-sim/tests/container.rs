//! What a container relies on: the gRPC health service and `dn-sim healthcheck`, settings from
//! `DN_SIM_*` and `OZONE-SITE.XML_*` environment variables, and one-line errors with exit code 2 (bad settings) or 1 (a
//! server that cannot start).

use dn_sim::Config;
use dn_sim::net::health::{XCEIVER_SERVICE, check};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[tokio::test]
async fn health_service_reports_serving_for_the_server_and_the_client_protocol() {
    let server = dn_sim::start(Config::loopback()).await.unwrap();
    let addr = server.local_addr().to_string();
    let second = Duration::from_secs(1);
    for service in ["", XCEIVER_SERVICE] {
        let message = check(&addr, service, second).await.unwrap();
        assert!(message.ends_with("SERVING"), "{message}");
    }
    let unknown = check(&addr, "no.such.Service", second).await.unwrap_err();
    assert!(unknown.contains("NotFound"), "{unknown}");
    server.shutdown().await;
    // Refused, or reset while the listener closes: either way an error, never SERVING.
    let gone = check(&addr, "", second).await.unwrap_err();
    assert!(!gone.contains("SERVING"), "{gone}");
}

/// The `client` and `admin` addresses of a `--ready-file`, once it exists (it is renamed into
/// place whole, so it is never seen half-written); polled until `deadline`.
fn ready_addresses(path: &std::path::Path, child: &mut Child) -> (String, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let field = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                    .map(str::to_string)
            };
            return (field("client").expect("a client line"), field("admin"));
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("dn-sim exited before writing {}: {status}", path.display());
        }
        assert!(Instant::now() < deadline, "no ready file within 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn dn_sim() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dn-sim"));
    // The test's own environment must not leak settings into the child.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("DN_SIM_") || name.starts_with("OZONE-SITE.XML_") {
            cmd.env_remove(&*name);
        }
    }
    cmd.env("NO_COLOR", "1").env("RUST_LOG", "info");
    cmd
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

fn healthcheck(addr: &str) -> (i32, String, String) {
    run(dn_sim().args(["healthcheck", "--addr", addr, "--timeout", "1s"]))
}

fn http_get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

/// Kills the child when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn ready_file_holds_the_bound_addresses_of_port_0() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let mut server = Running(
        dn_sim()
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .arg("--ready-file")
            .arg(&ready)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (client, admin) = ready_addresses(&ready, &mut server.0);
    let text = std::fs::read_to_string(&ready).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    let admin = admin.expect("an admin line");
    // The Ratis ports follow --listen: port 0 on its address.
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("a '{prefix}' line: {text}"))
            .to_string()
    };
    let (ratis, ratis_admin) = (line("ratis "), line("ratis-admin "));
    assert_ne!(ratis, ratis_admin, "{text}");
    for addr in [&client, &admin, &ratis, &ratis_admin] {
        assert!(addr.starts_with("127.0.0.1:"), "{text}");
        assert_ne!(addr, "127.0.0.1:0", "{text}");
    }
    // Written after binding: both answer at once, with no wait.
    let (code, stdout, stderr) = healthcheck(&client);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(http_get(&admin, "/config").contains("200 OK"));
    // No temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1);

    // --metrics-listen none: the client line only.
    let ready = dir.path().join("ready-no-admin");
    let mut server = Running(
        dn_sim()
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "none"])
            .arg("--ready-file")
            .arg(&ready)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (client, admin) = ready_addresses(&ready, &mut server.0);
    assert_eq!(admin, None);
    assert_eq!(healthcheck(&client).0, 0);
}

#[test]
fn settings_come_from_the_environment_and_healthcheck_follows_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let mut server = Running(
        dn_sim()
            .env("DN_SIM_LISTEN", "127.0.0.1:0")
            .env("DN_SIM_METRICS_LISTEN", "127.0.0.1:0")
            .env("DN_SIM_READY_FILE", &ready)
            .env("DN_SIM_CONTAINERS", "1-3")
            .env("DN_SIM_DELAY", "echo=1ms;write_chunk=2ms")
            .env("DN_SIM_FAULT", "read_chunk=drop:0.5")
            .env(
                "OZONE-SITE.XML_hdds.datanode.read.chunk.threads.per.volume",
                "7",
            )
            .env("OZONE-SITE.XML_ozone.recon.address", "recon")
            .env("OZONE-SITE.XML_ozone.om.address", "om")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );

    let (addr, http) = ready_addresses(&ready, &mut server.0);
    let http = http.expect("an admin line");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, stdout, stderr) = healthcheck(&addr);
        if code == 0 {
            assert_eq!(
                stdout.trim(),
                format!("dn-sim healthcheck: {addr} {XCEIVER_SERVICE}: SERVING")
            );
            break;
        }
        assert_eq!(code, 1, "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(Instant::now() < deadline, "never healthy: {stderr}");
        std::thread::sleep(Duration::from_millis(100));
    }

    let config = http_get(&http, "/config");
    for expected in [
        "\"handler_count\":7",
        "\"containers\":\"1-3\"",
        "\"echo\":\"1ms\"",
        "\"write_chunk\":\"2ms\"",
        "\"read_chunk\":[\"drop:0.5\"]",
    ] {
        assert!(config.contains(expected), "{expected} in {config}");
    }

    server.0.kill().unwrap();
    let mut log = String::new();
    server
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0].contains("ozone.om.address, ozone.recon.address"),
        "{log}"
    );

    let (code, _, stderr) = healthcheck(&addr);
    assert_eq!(code, 1);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot connect"), "{stderr}");
}

#[test]
fn bad_settings_exit_2_with_one_line_naming_them() {
    // (arguments, environment, what the error line names)
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (vec!["healthcheck", "--nope"], vec![], "--nope"),
        (
            vec!["healthcheck", "--timeout", "soon"],
            vec![],
            "--timeout",
        ),
        (
            vec!["--listen", "127.0.0.1:0", "healthcheck"],
            vec![],
            "healthcheck",
        ),
        (
            vec!["-D", "ozone.recon.address=recon"],
            vec![],
            "ozone.recon.address",
        ),
        (vec!["-D", "ozone.scm.names=a,b"], vec![], "ozone.scm.names"),
        (vec!["--scm", "scm"], vec![], "--scm"),
        (
            vec![],
            vec![("DN_SIM_HANDLER_COUNT", "0")],
            "--handler-count",
        ),
        (
            vec![],
            vec![("OZONE-SITE.XML_hdds.datanode.handler.count", "many")],
            "OZONE-SITE.XML_hdds.datanode.handler.count",
        ),
        (vec!["--sync"], vec![], "--sync"),
        (
            vec![
                "--store",
                "discard",
                "-D",
                "hdds.container.chunk.write.sync=true",
            ],
            vec![],
            "--sync",
        ),
    ];
    for (args, env, needle) in cases {
        let mut cmd = dn_sim();
        cmd.args(&args)
            .env("DN_SIM_LISTEN", "127.0.0.1:0")
            .env("DN_SIM_METRICS_LISTEN", "none");
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let (code, stdout, stderr) = run(&mut cmd);
        assert_eq!(code, 2, "{args:?} {env:?}: {stderr}");
        assert_eq!(stdout, "", "{args:?} {env:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?} {env:?}: {stderr}");
    }
}

#[test]
fn a_server_that_cannot_start_exits_1_with_one_line() {
    // Valid settings, but the port is taken (held by this test) or the store's directory is
    // under a regular file: the server could not start, exit code 1 (2 is for bad settings).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "not a directory").unwrap();
    let store = format!("dir:{}", file.join("store").display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--listen", &addr], addr.as_str()),
        (
            vec!["--listen", "127.0.0.1:0", "--store", &store],
            "--store",
        ),
    ];
    for (args, needle) in cases {
        let mut cmd = dn_sim();
        cmd.args(&args).env("DN_SIM_METRICS_LISTEN", "none");
        let (code, stdout, stderr) = run(&mut cmd);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert_eq!(stdout, "", "{args:?}");
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("dn-sim:"))
            .collect();
        assert_eq!(errors.len(), 1, "{args:?}: {stderr}");
        assert!(errors[0].contains(needle), "{args:?}: {stderr}");
    }
    drop(taken);
}
