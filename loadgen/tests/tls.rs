//! loadgen against a dn-sim with TLS and with mutual TLS, on both transports (per-request
//! streams: loadgen's own HTTP/2 client; persistent streams: tonic's Channel), with certificates
//! made at test time; the refusals a user must understand in one line; the `--tls*` flag rules.

#[allow(dead_code)] // the certificates dn-sim's own tests need too
#[path = "../../dn-sim/tests/support/certs.rs"]
mod certs;
mod support;

use certs::{TestPki, arg};
use clap::Parser;
use dn_sim::net::tls::ServerTls;
use loadgen::cli::Cli;
use support::assert_usage_error;

fn run(args: &[&str]) -> Result<loadgen::Summary, String> {
    let mut argv = vec!["loadgen"];
    argv.extend_from_slice(args);
    loadgen::run(Cli::try_parse_from(argv).expect("valid flags")).map_err(|e| e.to_string())
}

fn dn_sim(pki: &TestPki, mutual: bool) -> dn_sim::EmbeddedServer {
    let mut tls = ServerTls::new(pki.server_cert.clone(), pki.server_key.clone());
    if mutual {
        tls.client_ca = Some(pki.ca.clone());
    }
    let config = dn_sim::Config {
        tls: Some(tls),
        ..dn_sim::Config::loopback()
    };
    dn_sim::EmbeddedServer::start(config, 1).unwrap()
}

/// Echo on both transports and a write+read, all of which must succeed.
fn echo_and_write_read(addr: &str, tls: &[&str]) {
    for mode in ["per-request", "persistent"] {
        let mut args = vec![
            "echo",
            "--target",
            addr,
            "-n",
            "300",
            "-t",
            "4",
            "--clients",
            "2",
            "--payload-resp",
            "1",
            "--stream-mode",
            mode,
        ];
        args.extend_from_slice(tls);
        let s = run(&args).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(
            (s.successes(), s.failures()),
            (300, 0),
            "{mode}: {}",
            s.text
        );
        assert_eq!(s.results.bytes_received, 300 * 1024, "{mode}");
        assert!(s.header.contains("(TLS)"), "{}", s.header);
    }
    let mut args = vec![
        "read",
        "--target",
        addr,
        "-n",
        "6",
        "-t",
        "2",
        "--write-size",
        "512KB",
    ];
    args.extend_from_slice(tls);
    let s = run(&args).unwrap();
    assert_eq!(s.failures(), 0, "{}", s.text);
    let read = s.results.read.as_ref().expect("read results");
    assert!(
        read.bytes_read > 0 && read.bytes_verified == read.bytes_read,
        "{}",
        s.text
    );
    assert_eq!(s.results.integrity_errors(), 0);
}

#[test]
fn tls_on_both_transports() {
    let pki = TestPki::new();
    let server = dn_sim(&pki, false);
    let addr = server.local_addr().to_string();
    echo_and_write_read(&addr, &["--tls", "--tls-ca", arg(&pki.ca)]);
    // A client certificate the server does not ask for changes nothing.
    echo_and_write_read(
        &addr,
        &[
            "--tls",
            "--tls-ca",
            arg(&pki.ca),
            "--tls-client-cert",
            arg(&pki.client_cert),
            "--tls-client-key",
            arg(&pki.client_key),
        ],
    );
}

#[test]
fn mutual_tls_on_both_transports_and_a_missing_client_certificate() {
    let pki = TestPki::new();
    let server = dn_sim(&pki, true);
    let addr = server.local_addr().to_string();
    echo_and_write_read(
        &addr,
        &[
            "--tls",
            "--tls-ca",
            arg(&pki.ca),
            "--tls-client-cert",
            arg(&pki.client_cert),
            "--tls-client-key",
            arg(&pki.client_key),
        ],
    );
    for mode in ["per-request", "persistent"] {
        let err = run(&[
            "echo",
            "--target",
            &addr,
            "-n",
            "5",
            "--stream-mode",
            mode,
            "--tls",
            "--tls-ca",
            arg(&pki.ca),
        ])
        .map(|s| s.text)
        .unwrap_err();
        println!("{mode}: {err}");
        assert!(
            err.contains("requires a client certificate") && err.contains(&addr),
            "{mode}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn wrong_ca_wrong_name_and_plain_text_fail_in_one_line() {
    let pki = TestPki::new();
    let server = dn_sim(&pki, false);
    let addr = server.local_addr().to_string();
    for mode in ["per-request", "persistent"] {
        let echo = |extra: &[&str]| {
            let mut args = vec!["echo", "--target", &addr, "-n", "5", "--stream-mode", mode];
            args.extend_from_slice(extra);
            let err = run(&args).map(|s| s.text).unwrap_err();
            println!("{mode} {extra:?}: {err}");
            err
        };
        let err = echo(&["--tls", "--tls-ca", arg(&pki.other_ca)]);
        assert!(
            err.contains("certificate verify failed: UnknownIssuer"),
            "{mode}: {err}"
        );
        assert!(err.contains(&addr), "{mode}: {err}");
        let err = echo(&[
            "--tls",
            "--tls-ca",
            arg(&pki.ca),
            "--tls-server-name",
            "dn1.example",
        ]);
        assert!(err.contains("not valid for name"), "{mode}: {err}");
        assert!(err.contains("dn1.example"), "{mode}: {err}");
        // A plain-text client against the TLS port fails on its own: the HTTP/2 client at
        // connect (it waits for the server's SETTINGS), tonic's on every call.
        let mut args = vec!["echo", "--target", &addr, "-n", "5", "--stream-mode", mode];
        args.push("--fail-at-end");
        match run(&args) {
            Err(e) => {
                println!("{mode} plain text: {e}");
                assert!(
                    e.contains("cannot connect to") && e.contains("--tls"),
                    "{mode}: {e}"
                );
                assert_eq!(e.lines().count(), 1, "{e}");
            }
            Ok(s) => {
                assert_eq!(mode, "persistent", "{}", s.text);
                assert_eq!((s.successes(), s.failures()), (0, 5), "{}", s.text);
            }
        }
    }
    // ...and TLS clients are served all the same (a scheme in --target is not part of the
    // name the certificate is checked against).
    for target in [
        addr.clone(),
        format!("https://{addr}"),
        format!("http://{addr}"),
    ] {
        let args = ["echo", "--target", &target, "-n", "50", "--tls", "--tls-ca"];
        let mut args = args.to_vec();
        args.push(arg(&pki.ca));
        let s = run(&args).unwrap();
        assert_eq!(s.successes(), 50, "{target}");
    }

    // A TLS client against a plain-text port.
    let plain = dn_sim::EmbeddedServer::start(dn_sim::Config::loopback(), 1).unwrap();
    let plain_addr = plain.local_addr().to_string();
    let err = run(&[
        "echo",
        "--target",
        &plain_addr,
        "-n",
        "5",
        "--tls",
        "--tls-ca",
        arg(&pki.ca),
    ])
    .map(|s| s.text)
    .unwrap_err();
    println!("TLS to a plain-text port: {err}");
    assert!(err.contains("did not answer with TLS"), "{err}");
}

#[test]
fn tls_flag_combinations_are_usage_errors() {
    let pki = TestPki::new();
    let ca = arg(&pki.ca);
    let t = "127.0.0.1:9";
    for (args, needle) in [
        (
            vec!["echo", "--target", t, "--tls-ca", ca],
            "--tls-ca needs --tls",
        ),
        (
            vec!["echo", "--target", t, "--tls-server-name", "x"],
            "--tls-server-name needs --tls",
        ),
        (vec!["echo", "--target", t, "--tls"], "--tls needs --tls-ca"),
        (
            vec!["echo", "--target", "null", "--tls", "--tls-ca", ca],
            "--target null",
        ),
        (
            vec!["echo", "--tls", "--tls-ca", ca],
            "--tls needs --target",
        ),
        (
            vec![
                "echo",
                "--target",
                t,
                "--tls",
                "--tls-ca",
                ca,
                "--tls-client-cert",
                ca,
            ],
            "--tls-client-cert needs --tls-client-key",
        ),
        (
            vec![
                "echo",
                "--target",
                t,
                "--tls",
                "--tls-ca",
                ca,
                "--tls-client-key",
                ca,
            ],
            "--tls-client-key needs --tls-client-cert",
        ),
        (
            vec![
                "echo",
                "--target",
                t,
                "--tls",
                "--tls-ca",
                "/nonexistent/ca.pem",
            ],
            "--tls-ca /nonexistent/ca.pem",
        ),
        (
            vec!["echo", "--target", "https://127.0.0.1:9"],
            "needs --tls",
        ),
    ] {
        assert_usage_error(&args, needle);
    }
}

#[test]
fn tls_1_2_only_server_with_mutual_tls() {
    // hdds.grpc.tls.protocols=TLSv1.2 (Ozone 2.2.0): in TLS 1.2 the server refuses a missing
    // client certificate inside the handshake, not after it as in TLS 1.3.
    let pki = TestPki::new();
    let mut tls = ServerTls::new(pki.server_cert.clone(), pki.server_key.clone());
    tls.client_ca = Some(pki.ca.clone());
    tls.versions = dn_sim::net::tls::TlsVersions::Tls12;
    let config = dn_sim::Config {
        tls: Some(tls),
        ..dn_sim::Config::loopback()
    };
    let server = dn_sim::EmbeddedServer::start(config, 1).unwrap();
    let addr = server.local_addr().to_string();
    for mode in ["per-request", "persistent"] {
        let base = ["echo", "--target", &addr, "-n", "20", "--stream-mode", mode];
        let mut args = base.to_vec();
        args.extend(["--tls", "--tls-ca", arg(&pki.ca)]);
        let err = run(&args).map(|s| s.text).unwrap_err();
        assert!(
            err.contains("requires a client certificate"),
            "{mode}: {err}"
        );
        args.extend([
            "--tls-client-cert",
            arg(&pki.client_cert),
            "--tls-client-key",
            arg(&pki.client_key),
        ]);
        let s = run(&args).unwrap();
        assert_eq!((s.successes(), s.failures()), (20, 0), "{mode}: {}", s.text);
    }
}

#[test]
fn a_server_that_never_finishes_the_tls_handshake_is_a_one_line_timeout() {
    // A port that accepts and then says nothing: the ClientHello is never answered.
    let pki = TestPki::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let held = std::sync::Arc::clone(&held);
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                held.lock().unwrap().push(s); // kept open, never read
            }
        });
    }
    for mode in ["per-request", "persistent"] {
        let started = std::time::Instant::now();
        let err = run(&[
            "echo",
            "--target",
            &addr,
            "-n",
            "5",
            "--stream-mode",
            mode,
            "--connect-timeout",
            "500ms",
            "--tls",
            "--tls-ca",
            arg(&pki.ca),
        ])
        .map(|s| s.text)
        .unwrap_err();
        println!("{mode}: {err}");
        assert!(
            err.contains("cannot connect to") && err.contains(&addr),
            "{mode}: {err}"
        );
        assert!(err.contains("no answer within 500ms"), "{mode}: {err}");
        assert_eq!(err.lines().count(), 1, "{mode}: {err}");
        // Bounded by --connect-timeout, not by the server (generous: the machine is shared).
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{mode}"
        );
    }
    assert!(!held.lock().unwrap().is_empty(), "the client connected");
}
