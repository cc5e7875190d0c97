//! `loadgen calibrate` against a dn-sim started with a known profile gives that profile's costs
//! back (within the fit's tolerance); bad flags exit 2 with one line naming the flag.

mod support;

use clap::Parser;
use dn_sim::sim::profile::{Profile, ProfileKind};
use loadgen::cli::Cli;

/// Costs large enough that the test's own client (a debug build on a shared machine) is not
/// the limit: one loop at pool 10 serves 100/s (10 ms a message pair), two handlers at pool 2
/// 133/s (15 ms a command), and a 1 MiB response costs its handler 16.8 ms more.
const KNOWN: &str = "format = \"dn-sim-profile/1\"\nkind = \"example\"\n\
    [machine]\ncores = 2\nozone_release = \"2.2.0\"\n\
    [event_loops.request]\nper_message_us = 5000.0\n\
    [event_loops.response]\nper_message_us = 5000.0\n\
    [handler.request]\nper_message_us = 15000.0\n\
    [handler.response]\nper_byte_ns = 16.0\n";

#[test]
fn calibrating_a_dn_sim_of_a_known_profile_gives_back_its_costs() {
    // Both dn-sims drop the chunks' bytes, as exp-twin's do: on a fast machine the cells write
    // more than a memory store's 1 GiB capacity, and the rest would fail DISK_OUT_OF_SPACE.
    let mut config = dn_sim::Config::loopback();
    config.store = dn_sim::datanode::store::StoreKind::Discard;
    config.handler_count = 10;
    config.profile = Some(Profile::parse(KNOWN).unwrap());
    config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = dn_sim::EmbeddedServer::start(config, 2).expect("dn-sim starts");
    let mut plain = dn_sim::Config::loopback();
    plain.store = dn_sim::datanode::store::StoreKind::Discard;
    plain.handler_count = 10;
    let baseline = dn_sim::EmbeddedServer::start(plain, 1).expect("dn-sim starts");
    let baseline = baseline.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fitted.toml");
    let cells = dir.path().join("cells.json");
    let target = server.local_addr().to_string();
    let admin = server.metrics_addr().unwrap().to_string();
    let argv = [
        "loadgen",
        "calibrate",
        "--target",
        &target,
        "--admin",
        &admin,
        "--pool",
        "10",
        "--pools",
        "2,10",
        "--clients",
        "8",
        "-t",
        "16",
        "--duration",
        "1500ms",
        "--warmup",
        "300ms",
        // The warm-up runs (a JIT's; dn-sim has none), kept short: at this profile's 100 calls/s
        // a loop, the default's 30 000 echoes of 0 B would take minutes.
        "--warm-up-calls",
        "20",
        "--cores",
        "2",
        "--baseline",
        &baseline,
        "--out",
        out.to_str().unwrap(),
        "--cells-out",
        cells.to_str().unwrap(),
    ];
    let cli = Cli::try_parse_from(argv).unwrap();
    let table = loadgen::run_tool(&cli)
        .expect("a tool")
        .expect("calibrated");
    let p = Profile::load(&out).unwrap();
    let report = format!(
        "{}\n{}",
        table.stdout,
        std::fs::read_to_string(&out).unwrap()
    );
    assert_eq!(p.kind, ProfileKind::Measured, "{report}");
    assert_eq!(p.cores, 2);
    let loop_us = p.event_loop_request.per_message_us + p.event_loop_response.per_message_us;
    let handler_us = p.handler_request.per_message_us + p.handler_response.per_message_us;
    let resp_ns = p.event_loop_response.per_byte_ns + p.handler_response.per_byte_ns;
    // Which stage limits where, and by how much relative to the other, compared within this
    // run: the handler costs 1.5 x the loop. Absolute costs can only come out higher than the
    // profile's (a virtual queue serves no faster than its cost; dn-sim's own time and a busy
    // machine's late wake-ups add), and not by much.
    let ratio = handler_us / loop_us;
    assert!(
        (ratio / 1.5 - 1.0).abs() <= 0.2,
        "handler / loop {ratio:.2}\n{report}"
    );
    for (name, v, truth) in [
        ("loop", loop_us, 10_000.0),
        ("handler", handler_us, 15_000.0),
    ] {
        assert!(
            (0.9 * truth..=1.6 * truth).contains(&v),
            "{name} {v} µs, profile {truth}\n{report}"
        );
    }
    // The response's cost per byte, less the baseline's: a difference of latencies at one
    // request in flight, each noisy on a shared machine, so only its order of magnitude.
    assert!(
        (4.0..=32.0).contains(&resp_ns),
        "response {resp_ns} ns/B, profile 16\n{report}"
    );
    // The writes' requests cost the profile nothing per byte beyond the baseline's.
    let req_ns = p.event_loop_request.per_byte_ns + p.handler_request.per_byte_ns;
    assert!(req_ns < resp_ns, "request {req_ns} ns/B\n{report}");
    assert!(p.fit.residuals.len() >= 13, "{report}");
    // The loops' and the handler's costs were checked on an embedded dn-sim with the profile.
    assert!(
        report.contains("# Loops, handler and CPU checked on dn-sim (loaded 0 B echoes"),
        "{report}"
    );
    // So were the floor and its jitter, on the 0 B echo at one request in flight.
    assert!(
        report.contains("# Latency floor checked on dn-sim (0 B echo at one request in flight"),
        "{report}"
    );
    // The cells file feeds a fit of its own (--with), to the same costs: those the check's
    // first round ran with (the check may scale them after).
    let refit = dir.path().join("refit.toml");
    let cli = Cli::try_parse_from([
        "loadgen",
        "calibrate",
        "--with",
        cells.to_str().unwrap(),
        "--cores",
        "2",
        // The check on dn-sim moves CPU between the handler and the background only.
        "--check-rounds",
        "0",
        "--out",
        refit.to_str().unwrap(),
    ])
    .unwrap();
    loadgen::run_tool(&cli).unwrap().unwrap();
    let q = Profile::load(&refit).unwrap();
    let first_round = format!(
        "at {:.1} + {:.1} + {:.1} µs",
        q.event_loop_request.per_message_us + q.event_loop_response.per_message_us,
        q.handler_request.per_message_us,
        q.cpu_handler.per_message_us + q.cpu_background.per_message_us
    );
    let checked = report
        .lines()
        .find(|l| l.starts_with("# Loops, handler and CPU checked"))
        .and_then(|l| l.split("on the target, ").nth(1))
        .and_then(|rounds| rounds.split(", ").next());
    assert!(
        checked.is_some_and(|round| round.ends_with(&first_round)),
        "{first_round}\n{report}"
    );
    assert_eq!(q.handler_request.per_byte_ns, p.handler_request.per_byte_ns);
    assert_eq!(
        q.event_loop_request.per_byte_ns,
        p.event_loop_request.per_byte_ns
    );
}

#[test]
fn bad_calibrate_flags_exit_2_with_one_line_naming_them() {
    support::assert_usage_error(&["calibrate", "--pool", "0"], "--pool");
    support::assert_usage_error(&["calibrate", "--release", "1.4.1"], "--release");
    support::assert_usage_error(
        &["calibrate", "--target", "127.0.0.1:1", "--pools", "2"],
        "--pools",
    );
    support::assert_usage_error(&["calibrate"], "--target");
    support::assert_usage_error(
        &["calibrate", "--with", "x.json", "--check-on", " "],
        "--check-on",
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"cells\": 7}").unwrap();
    support::assert_usage_error(&["calibrate", "--with", bad.to_str().unwrap()], "--with");
}
