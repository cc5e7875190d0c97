//! HTTP/2 and connection abuse against a `dn-sim` binary: for each attack an honest
//! Echo client on a connection of its own keeps being answered (none fails; p99 under 1 s on a
//! loaded 2-core machine; at least a twentieth of its rate before the attack, since attacker,
//! client and server share the two cores), the server's peak resident memory stays under a
//! stated bound, and the metrics count what happened.
//!
//! The tests take turns (one lock), so that each attack's numbers are its own.

#[path = "support/attacks.rs"]
#[allow(dead_code)]
mod attacks;
#[allow(dead_code)]
mod support;

use attacks::{Attack, AttackReport, AttackSize, H2Conn, HonestClient, HonestReport};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::process::DnSimProcess;

static SERIAL: Mutex<()> = Mutex::new(());

const ENHANCE_YOUR_CALM: u32 = 0xb;
const REFUSED_STREAM: u32 = 0x7;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn size(duration_ms: u64) -> AttackSize {
    AttackSize {
        duration: Duration::from_millis(duration_ms),
        connections: 4,
        streams_per_connection: 150,
        churn_total: 10_000,
        churn_concurrency: 200,
    }
}

struct Outcome {
    before: HonestReport,
    during: HonestReport,
    attack: AttackReport,
    /// Resident memory when the attack began, and the most during it, MiB.
    rss_before: f64,
    peak_rss: f64,
    /// The honest client's calls in all (each one stream), and those answered.
    honest_calls: u64,
    honest_ok: u64,
}

/// The honest client runs alone for a while, then beside the attack.
fn under_attack(dn: &DnSimProcess, attack: Attack, size: AttackSize) -> Outcome {
    let honest = HonestClient::start(dn.addr);
    std::thread::sleep(Duration::from_millis(400));
    dn.reset_peak();
    let rss_before = dn.rss_mib();
    honest.mark();
    let report = runtime().block_on(attacks::run(attack, dn.addr, size));
    let peak_rss = dn.peak_rss_mib();
    honest.mark();
    std::thread::sleep(Duration::from_millis(50));
    let periods = honest.finish();
    let honest_ok = periods.iter().map(|p| p.ok).sum();
    let honest_calls = periods.iter().map(|p| p.ok + p.failed).sum();
    let mut periods = periods.into_iter();
    let (before, during) = (periods.next().unwrap(), periods.next().unwrap());
    eprintln!(
        "{}: {} {} in {:.2} s ({:.0}/s) on {} connections; server: {}",
        attack.name(),
        report.units,
        attack.unit(),
        report.elapsed.as_secs_f64(),
        report.rate(),
        report.connections,
        report.answers.summary()
    );
    eprintln!("  honest before: {}", before.summary());
    eprintln!("  honest during: {}", during.summary());
    eprintln!("  dn-sim RSS {rss_before:.1} MiB, peak during {peak_rss:.1} MiB");
    Outcome {
        before,
        during,
        attack: report,
        rss_before,
        peak_rss,
        honest_calls,
        honest_ok,
    }
}

/// The honest client's promise: every call answered, p99 under 1 s, and not starved.
fn assert_honest_served(o: &Outcome) {
    assert_eq!(o.during.failed, 0, "honest calls failed during the attack");
    assert!(
        o.during.ok >= 5,
        "honest calls during the attack: {}",
        o.during.ok
    );
    assert!(
        o.during.p99() < Duration::from_secs(1),
        "honest p99 {:?}",
        o.during.p99()
    );
    assert!(
        o.during.rate() >= o.before.rate() / 20.0,
        "honest rate {:.0}/s during vs {:.0}/s before",
        o.during.rate(),
        o.before.rate()
    );
}

fn assert_peak_under(o: &Outcome, growth_mib: f64) {
    assert!(
        o.peak_rss - o.rss_before < growth_mib,
        "peak RSS {:.1} MiB from {:.1} MiB (bound: +{growth_mib} MiB)",
        o.peak_rss,
        o.rss_before
    );
}

/// The Echo requests the server served were the honest client's (all it was answered, at most
/// all it sent: a call in flight when the client stopped may have been served too).
fn assert_honest_only(dn: &DnSimProcess, o: &Outcome) {
    // The server counts a request just after it answers it.
    let served = || {
        metric(
            dn,
            "dn_sim_requests_total{type=\"Echo\",result=\"SUCCESS\"}",
        )
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while (served() as u64) < o.honest_ok && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let served = served();
    assert!(
        (o.honest_ok..=o.honest_calls + 1).contains(&(served as u64)),
        "served {served}; the honest client sent {} and was answered {}",
        o.honest_calls,
        o.honest_ok
    );
}

fn metric(dn: &DnSimProcess, name: &str) -> f64 {
    dn.metric(name).unwrap_or(0.0)
}

#[test]
fn rapid_reset_is_cut_off_and_the_honest_client_is_served() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dn = DnSimProcess::spawn(&[]);
    let o = under_attack(&dn, Attack::RapidReset, size(1000));
    assert_honest_served(&o);
    assert_peak_under(&o, 64.0);
    let resets = metric(
        &dn,
        "dn_sim_http2_frames_received_total{type=\"RST_STREAM\"}",
    );
    // h2 answers a connection's 21st reset of a stream not yet served with GOAWAY
    // ENHANCE_YOUR_CALM "too_many_resets" (--max-pending-accept-reset-streams 20).
    let goaways = metric(
        &dn,
        "dn_sim_http2_goaways_sent_total{code=\"ENHANCE_YOUR_CALM\"}",
    );
    assert!(goaways >= 1.0, "GOAWAY ENHANCE_YOUR_CALM sent: {goaways}");
    // Each connection so ended had its 21 resets counted (at least; h2 reads ahead).
    assert!(
        resets >= 21.0 * goaways,
        "RST_STREAM frames counted: {resets} for {goaways} GOAWAYs"
    );
    // Every GOAWAY counted reached the attacker, but perhaps the last: the attacker stops
    // reading at its deadline.
    let received = o.attack.answers.goaways_with(ENHANCE_YOUR_CALM) as f64;
    assert!(
        (goaways - 1.0..=goaways).contains(&received),
        "the attacker received {received} of {goaways}"
    );
    assert!(
        metric(
            &dn,
            "dn_sim_connections_closed_total{reason=\"goaway_error\"}"
        ) >= goaways
    );
}

#[test]
fn streams_never_finished_stop_at_the_stream_limit() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dn = DnSimProcess::spawn(&["--max-concurrent-streams", "100"]);
    let o = under_attack(&dn, Attack::StalledStreams, size(1000));
    assert_honest_served(&o);
    assert_peak_under(&o, 64.0);
    // 4 connections × 150 streams: 100 of each are open, the other 50 refused.
    assert_eq!(o.attack.units, 600);
    assert_eq!(o.attack.answers.resets.get(&REFUSED_STREAM), Some(&200));
    assert_eq!(
        metric(
            &dn,
            "dn_sim_http2_resets_sent_total{code=\"REFUSED_STREAM\"}"
        ),
        200.0
    );
    assert_eq!(
        metric(&dn, "dn_sim_http2_frames_received_total{type=\"HEADERS\"}") as u64 - o.honest_calls,
        600
    );
}

#[test]
fn a_write_chunk_that_stalls_half_way_holds_only_its_bytes() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dn = DnSimProcess::spawn(&[]);
    // 4 connections × 8 streams, each 1 MiB into a 4 MiB message: 32 MiB received, none served.
    let mut s = size(1000);
    s.streams_per_connection = 8;
    let received_before = metric(&dn, "dn_sim_received_bytes_total");
    let o = under_attack(&dn, Attack::StalledBody, s);
    assert_honest_served(&o);
    assert_eq!(o.attack.units, 32);
    // What the server holds is the bytes sent (tonic buffers a message until it is whole),
    // about twice over at most while h2 hands them on.
    assert_peak_under(&o, 32.0 * 2.0 + 32.0);
    assert!(
        o.peak_rss - o.rss_before >= 16.0,
        "the stalled bytes are held: +{:.1} MiB",
        o.peak_rss - o.rss_before
    );
    let received = metric(&dn, "dn_sim_received_bytes_total") - received_before;
    assert_honest_only(&dn, &o);
    assert!(
        received < (o.honest_calls * 1024) as f64,
        "no stalled message reached the service: {received} bytes"
    );
}

#[test]
fn ten_thousand_connections_opened_and_dropped() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dn = DnSimProcess::spawn(&[]);
    let accepted_before = metric(&dn, "dn_sim_connections_accepted_total");
    let o = under_attack(&dn, Attack::ConnectionChurn, size(0));
    assert_honest_served(&o);
    assert_peak_under(&o, 64.0);
    assert_eq!(o.attack.units, 10_000);
    // The server may still be taking the last ones from its accept queue; then all are gone
    // again, the honest client's too (it closed last), and every close is counted.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let closed = || -> f64 {
        [
            "normal",
            "io_error",
            "bad_preface",
            "goaway_error",
            "handshake_timeout",
        ]
        .iter()
        .map(|r| {
            metric(
                &dn,
                &format!("dn_sim_connections_closed_total{{reason=\"{r}\"}}"),
            )
        })
        .sum()
    };
    let accepted = || metric(&dn, "dn_sim_connections_accepted_total") - accepted_before;
    while closed() < accepted() + accepted_before || metric(&dn, "dn_sim_connections_open") > 0.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "closed {} of {} accepted, {} still open",
            closed(),
            accepted(),
            metric(&dn, "dn_sim_connections_open")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A connection the client saw established can still be dropped by the kernel when the
    // accept queue (--so-backlog) is full; a few are, on a loaded machine.
    assert!(accepted() >= 9_900.0, "accepted {} of 10,001", accepted());
    assert_eq!(metric(&dn, "dn_sim_connections_refused_total"), 0.0);
}

#[test]
fn max_connections_closes_the_surplus_at_once_and_serves_the_rest() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dn = DnSimProcess::spawn(&["--max-connections", "9"]);
    let honest = HonestClient::start(dn.addr);
    std::thread::sleep(Duration::from_millis(300));
    let rt = runtime();
    rt.block_on(async {
        let answers = Arc::default();
        let mut held = Vec::new();
        for _ in 0..8 {
            held.push(H2Conn::open(dn.addr, &answers, false).await.unwrap());
        }
        // The tenth is closed before any SETTINGS: the handshake fails at once.
        for _ in 0..20 {
            let refused = tokio::time::timeout(
                Duration::from_secs(5),
                H2Conn::open(dn.addr, &answers, false),
            )
            .await
            .expect("a refused connection is closed at once, not left waiting");
            assert!(refused.is_err());
        }
        // Those accepted still work: one answers a PING.
        let conn = &mut held[0];
        use tokio::io::AsyncWriteExt;
        conn.write
            .write_all(&attacks::frame(attacks::PING, 0, 0, &[1; 8]))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(answers.lock().unwrap().ping_acks, 1);
        drop(held);
    });
    honest.mark();
    let periods = honest.finish();
    assert_eq!(periods.iter().map(|p| p.failed).sum::<u64>(), 0);
    assert_eq!(metric(&dn, "dn_sim_connections_refused_total"), 20.0);
}

#[test]
fn headers_over_the_limit_are_refused_per_stream() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dn = DnSimProcess::spawn(&[]);
    let o = under_attack(&dn, Attack::OversizeHeaders, size(1000));
    assert_honest_served(&o);
    assert_peak_under(&o, 64.0);
    assert!(o.attack.units >= 100, "requests sent: {}", o.attack.units);
    // dn-sim read them, h2 answers them with a 431 response (HEADERS, END_STREAM; those the
    // attacker read before its deadline) and serves none of them.
    let read = metric(&dn, "dn_sim_http2_frames_received_total{type=\"HEADERS\"}");
    assert!(
        read >= (o.honest_calls + 100) as f64,
        "HEADERS read: {read}"
    );
    assert!(
        o.attack.answers.headers >= 1,
        "{}",
        o.attack.answers.summary()
    );
    assert_honest_only(&dn, &o);
}

#[test]
fn settings_flood_is_answered_without_memory_growth() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dn = DnSimProcess::spawn(&[]);
    let o = under_attack(&dn, Attack::SettingsFlood, size(1000));
    assert_honest_served(&o);
    assert_peak_under(&o, 32.0);
    let counted = metric(&dn, "dn_sim_http2_frames_received_total{type=\"SETTINGS\"}");
    assert!(counted >= 10_000.0, "SETTINGS counted: {counted}");
    assert!(
        o.attack.answers.settings_acks >= 10_000,
        "{}",
        o.attack.answers.summary()
    );
}

#[test]
fn ping_flood_gets_too_many_pings_as_from_grpc_java() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dn = DnSimProcess::spawn(&[]);
    let o = under_attack(&dn, Attack::PingFlood, size(1000));
    assert_honest_served(&o);
    assert_peak_under(&o, 32.0);
    let kills = o
        .attack
        .answers
        .goaways
        .get(&(ENHANCE_YOUR_CALM, "too_many_pings".to_string()))
        .copied()
        .unwrap_or(0);
    assert!(kills >= 1, "{}", o.attack.answers.summary());
    let closed = metric(
        &dn,
        "dn_sim_connections_closed_total{reason=\"too_many_pings\"}",
    );
    // Every flooding connection ended so, but perhaps the last: opened as the attack's time
    // ran out, it may have sent no PING.
    let flooding = o.attack.connections as f64;
    assert!(
        (flooding - 1.0..=flooding).contains(&closed),
        "{closed} of {flooding} connections ended for too many pings"
    );
    // grpc-java's policy: two strikes allowed, the third ends the connection; the pings of the
    // batch after it are never read.
    assert!(o.attack.answers.ping_acks <= 3 * o.attack.connections);
}

#[test]
fn garbage_instead_of_the_preface_closes_the_connection() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dn = DnSimProcess::spawn(&[]);
    let o = under_attack(&dn, Attack::BadPreface, size(1000));
    assert_honest_served(&o);
    assert_peak_under(&o, 32.0);
    assert!(o.attack.units >= 100, "{}", o.attack.units);
    assert_eq!(
        o.attack.answers.closed, o.attack.units,
        "each one closed by the server"
    );
    let counted = metric(
        &dn,
        "dn_sim_connections_closed_total{reason=\"bad_preface\"}",
    );
    assert_eq!(counted, o.attack.units as f64);
}

#[test]
fn a_connection_that_never_says_hello_is_closed_after_the_handshake_timeout() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dn = DnSimProcess::spawn(&["--handshake-timeout", "300ms"]);
    runtime().block_on(async {
        use tokio::io::AsyncReadExt;
        let mut silent = tokio::net::TcpStream::connect(dn.addr).await.unwrap();
        let mut sink = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), silent.read_to_end(&mut sink))
            .await
            .expect("closed by the server")
            .ok();
        // A prompt client is not affected by the timeout.
        let answers = Arc::default();
        let conn = H2Conn::open(dn.addr, &answers, false).await.unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(!conn.is_gone());
    });
    assert_eq!(
        metric(
            &dn,
            "dn_sim_connections_closed_total{reason=\"handshake_timeout\"}"
        ),
        1.0
    );
}
