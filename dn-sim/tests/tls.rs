//! dn-sim with TLS (`--tls-cert`, `--tls-key`) and mutual TLS (`--tls-client-ca`), as a DataNode
//! with `hdds.grpc.tls.enabled`: flags and Ozone keys, `dn-sim healthcheck` over TLS, plain-text
//! and stalled clients, and an independent client (Python grpcio, BoringSSL).

#[allow(dead_code)] // support's raw gRPC helpers are for other test crates
mod support;

use clap::Parser;
use dn_sim::net::health::check_with;
use dn_sim::net::tls::{ClientTls, ServerTls, TonicConnector};
use std::ffi::OsString;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use support::certs::{TestPki, arg};
use support::process::DnSimProcess;
use tokio::io::AsyncReadExt;

const FLAGS: [&str; 3] = ["--tls-ca", "--tls-client-cert", "--tls-client-key"];

fn config(args: &[&str], env: &[(&str, &str)]) -> Result<dn_sim::Config, String> {
    let mut argv = vec!["dn-sim"];
    argv.extend_from_slice(args);
    let env = env
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
    dn_sim::cli::Args::try_parse_from(argv)
        .map_err(|e| e.to_string())?
        .config_with_env(env)
        .map(|(config, _)| config)
}

fn tls_server(pki: &TestPki, mutual: bool) -> dn_sim::Config {
    let mut tls = ServerTls::new(pki.server_cert.clone(), pki.server_key.clone());
    if mutual {
        tls.client_ca = Some(pki.ca.clone());
    }
    dn_sim::Config {
        tls: Some(tls),
        ..dn_sim::Config::loopback()
    }
}

/// A health check over TLS with `ca` (and a client certificate when `identity`).
async fn health(
    addr: std::net::SocketAddr,
    ca: &std::path::Path,
    identity: Option<(&std::path::Path, &std::path::Path)>,
) -> Result<String, String> {
    let tls = ClientTls::new(ca, identity, FLAGS)?;
    let connector = TonicConnector {
        tls: Arc::new(tls),
        addr: addr.to_string(),
        server_name: "localhost".into(),
    };
    check_with(
        &addr.to_string(),
        "",
        Duration::from_secs(5),
        Some(connector),
    )
    .await
}

#[test]
fn tls_flags_and_ozone_keys_are_checked() {
    let c = config(&["--tls-cert", "c.pem", "--tls-key", "k.pem"], &[]).unwrap();
    let tls = c.tls.expect("TLS on");
    assert_eq!(tls.cert.to_str(), Some("c.pem"));
    assert!(tls.client_ca.is_none());
    assert_eq!(tls.handshake_timeout, Duration::from_secs(10));
    assert!(config(&[], &[]).unwrap().tls.is_none());

    // hdds.grpc.tls.enabled=true needs certificates: dn-sim cannot ask an SCM for one.
    let err = config(&["-D", "hdds.grpc.tls.enabled=true"], &[]).unwrap_err();
    assert!(err.contains("--tls-cert"), "{err}");
    let env = [("OZONE-SITE.XML_hdds.grpc.tls.enabled", "TRUE")];
    let err = config(&[], &env).unwrap_err();
    assert!(
        err.contains("hdds.grpc.tls.enabled=true needs --tls-cert"),
        "{err}"
    );
    let on = config(&["--tls-cert", "c", "--tls-key", "k"], &env).unwrap();
    assert!(on.tls.is_some());
    let err = config(
        &[
            "-D",
            "hdds.grpc.tls.enabled=false",
            "--tls-cert",
            "c",
            "--tls-key",
            "k",
        ],
        &[],
    )
    .unwrap_err();
    assert!(
        err.contains("contradicts hdds.grpc.tls.enabled=false"),
        "{err}"
    );

    // hdds.grpc.tls.protocols (Ozone 2.2.0) restricts the versions.
    let c = config(
        &[
            "--tls-cert",
            "c",
            "--tls-key",
            "k",
            "-D",
            "hdds.grpc.tls.protocols=TLSv1.3",
        ],
        &[],
    )
    .unwrap();
    assert_eq!(
        c.tls.unwrap().versions,
        dn_sim::net::tls::TlsVersions::Tls13
    );
    let err = config(&["-D", "hdds.grpc.tls.protocols=TLSv1.1"], &[]).unwrap_err();
    assert!(err.contains("TLSv1.1"), "{err}");

    for (args, needle) in [
        (vec!["--tls-cert", "c"], "--tls-cert needs --tls-key"),
        (vec!["--tls-key", "k"], "--tls-key needs --tls-cert"),
        (
            vec!["--tls-client-ca", "ca"],
            "--tls-client-ca needs --tls-cert",
        ),
        (
            vec![
                "--tls-cert",
                "c",
                "--tls-key",
                "k",
                "--tls-handshake-timeout",
                "0s",
            ],
            "--tls-handshake-timeout",
        ),
    ] {
        let err = config(&args, &[]).unwrap_err();
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn unreadable_or_mismatched_files_exit_2_naming_the_flag() {
    let pki = TestPki::new();
    for (args, needle) in [
        (
            vec![
                "--tls-cert",
                "/nonexistent/cert.pem",
                "--tls-key",
                arg(&pki.server_key),
            ],
            "--tls-cert /nonexistent/cert.pem",
        ),
        (
            vec![
                "--tls-cert",
                arg(&pki.server_cert),
                "--tls-key",
                arg(&pki.server_cert),
            ],
            "--tls-key",
        ),
        (
            vec![
                "--tls-cert",
                arg(&pki.client_cert),
                "--tls-key",
                arg(&pki.server_key),
            ],
            "does not fit --tls-cert",
        ),
        (vec!["-D", "hdds.grpc.tls.enabled=true"], "--tls-cert"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_dn-sim"))
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "none"])
            .args(&args)
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: '{needle}' not in {stderr}"
        );
    }
}

#[tokio::test]
async fn tls_and_mutual_tls_serve_health_checks_and_refuse_clearly() {
    let pki = TestPki::new();
    let server = dn_sim::start(tls_server(&pki, false)).await.unwrap();
    let addr = server.local_addr();
    let ok = health(addr, &pki.ca, None).await.unwrap();
    assert!(ok.ends_with("SERVING"), "{ok}");
    // The wrong CA: refused by the client, in words.
    let err = health(addr, &pki.other_ca, None).await.unwrap_err();
    assert!(
        err.contains("certificate verify failed: UnknownIssuer"),
        "{err}"
    );
    assert!(err.contains(&addr.to_string()), "{err}");
    server.shutdown().await;

    let server = dn_sim::start(tls_server(&pki, true)).await.unwrap();
    let addr = server.local_addr();
    let err = health(addr, &pki.ca, None).await.unwrap_err();
    assert!(err.contains("requires a client certificate"), "{err}");
    let err = health(addr, &pki.ca, Some((&pki.stranger_cert, &pki.stranger_key)))
        .await
        .unwrap_err();
    assert!(
        err.contains("UnknownCA") || err.contains("BadCertificate"),
        "{err}"
    );
    let ok = health(addr, &pki.ca, Some((&pki.client_cert, &pki.client_key)))
        .await
        .unwrap();
    assert!(ok.ends_with("SERVING"), "{ok}");
    server.shutdown().await;
}

#[tokio::test]
async fn plain_text_and_stalled_clients_fail_alone() {
    let pki = TestPki::new();
    let mut config = tls_server(&pki, false);
    config.tls.as_mut().unwrap().handshake_timeout = Duration::from_millis(500);
    let server = dn_sim::start(config).await.unwrap();
    let addr = server.local_addr();

    // A client that connects and says nothing holds no one up...
    let mut stalled = tokio::net::TcpStream::connect(addr).await.unwrap();
    // ...nor does a plain-text gRPC client, which fails with an error of its own.
    let plain = dn_sim::net::health::check(&addr.to_string(), "", Duration::from_secs(5)).await;
    assert!(plain.is_err(), "a plain-text client was served: {plain:?}");
    for _ in 0..3 {
        let ok = health(addr, &pki.ca, None).await.unwrap();
        assert!(ok.ends_with("SERVING"), "{ok}");
    }
    // The stalled connection is closed once its handshake time is over.
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(10), stalled.read(&mut byte))
        .await
        .expect("the stalled connection was never closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    server.shutdown().await;
}

/// Handshakes in progress are bounded by `--max-connections`: clients that connect and never
/// speak occupy at most that many slots, a surplus socket is closed at once (and counted), and a
/// slot frees when its handshake times out.
#[tokio::test]
async fn pending_handshakes_are_bounded_by_max_connections() {
    let pki = TestPki::new();
    let mut config = tls_server(&pki, false);
    config.tls.as_mut().unwrap().handshake_timeout = Duration::from_secs(2);
    config.connections.max_connections = 3;
    let server = dn_sim::start(config).await.unwrap();
    let addr = server.local_addr();
    let mut stalled = Vec::new();
    for _ in 0..3 {
        stalled.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The fourth is closed well before any handshake could time out.
    let mut surplus = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_millis(1500), surplus.read(&mut byte))
        .await
        .expect("a surplus connection was kept while 3 handshakes were pending");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    let text = server.metrics().render_metrics(&server.admission().pool);
    assert!(
        text.contains("dn_sim_tls_handshake_failures_total{reason=\"over_limit\"} 1"),
        "{text}"
    );
    // Once the stalled handshakes time out, an honest client is served again.
    // (Polled until a deadline well past the 2 s handshake timeout, not slept for.)
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let ok = loop {
        match health(addr, &pki.ca, None).await {
            Ok(ok) => break ok,
            Err(e) => assert!(
                std::time::Instant::now() < deadline,
                "never served again: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(ok.ends_with("SERVING"), "{ok}");
    drop(stalled);
    server.shutdown().await;
}

#[test]
fn healthcheck_subcommand_speaks_tls() {
    let pki = TestPki::new();
    let sim = DnSimProcess::spawn(&[
        "--tls-cert",
        arg(&pki.server_cert),
        "--tls-key",
        arg(&pki.server_key),
        "--tls-client-ca",
        arg(&pki.ca),
    ]);
    let addr = sim.addr.to_string();
    let healthcheck = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_dn-sim"))
            .args(["healthcheck", "--addr", &addr])
            .args(extra)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let (code, text) = healthcheck(&[
        "--tls-ca",
        arg(&pki.ca),
        "--tls-client-cert",
        arg(&pki.client_cert),
        "--tls-client-key",
        arg(&pki.client_key),
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("SERVING"), "{text}");
    let (code, text) = healthcheck(&["--tls-ca", arg(&pki.ca)]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("requires a client certificate"), "{text}");
    let (code, text) = healthcheck(&[]);
    assert_eq!(code, Some(1), "a plain-text healthcheck passed: {text}");
    // Each refused handshake is counted (the two above: no client certificate, plain text).
    let failures = "dn_sim_tls_handshake_failures_total";
    let counted = (0..50)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            sim.metric(failures).unwrap_or(0.0)
        })
        .find(|n| *n >= 2.0);
    assert!(counted.is_some(), "{failures}: {:?}", sim.metric(failures));
    let (code, text) = healthcheck(&["--tls-server-name", "dn1"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--tls-server-name needs --tls-ca"), "{text}");
}

#[test]
fn grpcio_echo_over_tls_and_mutual_tls() {
    let pki = TestPki::new();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/tls-grpcio-check.sh"
    );
    let run = |sim: &DnSimProcess, extra: &[&str]| {
        let out = Command::new("bash")
            .arg(script)
            .arg(sim.addr.to_string())
            .arg(&pki.ca)
            .args(extra)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        println!("{}", text.trim_end());
        (out.status.code(), text)
    };
    let server_flags = [
        "--tls-cert",
        arg(&pki.server_cert),
        "--tls-key",
        arg(&pki.server_key),
    ];
    let sim = DnSimProcess::spawn(&server_flags);
    let (code, text) = run(&sim, &[]);
    if code == Some(3) {
        // Skipped: only a registry out of reach (the script's probe) may excuse it, and not in CI.
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "CI=true: nothing may skip: {text}");
        assert!(
            text.contains("registry out of reach"),
            "a skip without a probe: {text}"
        );
        eprintln!("{}", text.trim_end());
        return;
    }
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("Echo over TLS") && text.contains("SUCCESS"),
        "{text}"
    );
    drop(sim);

    let mut flags = server_flags.to_vec();
    flags.extend(["--tls-client-ca", arg(&pki.ca)]);
    let sim = DnSimProcess::spawn(&flags);
    let (code, text) = run(&sim, &[arg(&pki.client_cert), arg(&pki.client_key)]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("SUCCESS"), "{text}");
    let (code, text) = run(&sim, &["--expect-refusal"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("refused as expected"), "{text}");
}
