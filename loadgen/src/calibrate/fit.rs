//! The fit of `loadgen calibrate`: a DataNode's stage costs (`dn-sim --profile`) from measured
//! cells. Pure: no I/O.
//!
//! The model is dn-sim's (`dn-sim/src/sim/stages.rs`): a request passes its connection's event
//! loop (`L` per request and response together, plus per byte), a handler of the pool (`H` per
//! command, plus per byte), and the loop again. A closed loop of `N` requests in flight on `C`
//! connections against a pool of `P` handlers and `loops(P)` event loops (pool / 10, or
//! 2 × cores below 10, as `XceiverServerGrpc` in Ozone 2.0.0–2.2.0) serves at most
//!
//! ```text
//! X = min( N / R,  min(loops(P), C, N) / L,  min(P, N) / H )
//! ```
//!
//! calls/s, where `R` is the latency measured with one request in flight (the client's and the
//! network's time included). The fit, in three least-squares steps on few points:
//!
//! 1. **Per byte** from latencies at one request in flight: the response's cost per byte is the
//!    slope between echoes of 0 B and 1 MiB responses; the request's is the least-squares slope
//!    of WriteChunk latency over chunk sizes (64 KB, 1 MB, 4 MB). These slopes include the
//!    client's and the transport's cost per byte, which dn-sim's own run pays again: with
//!    `--baseline` (a dn-sim without a profile, measured by the same cells) its slopes are
//!    subtracted. The baseline's response slope is taken, when measured, from echoes that first
//!    slept as long as the target's 1 MiB echo took: a client that waited that long idle moves
//!    the bytes up to twice as slowly on this machine (0.24 vs 0.79 ms a MiB after 10 ms), in
//!    the target's latency and in dn-sim's with the profile alike.
//! 2. **Per message**, `L` and `H`: a grid search (log-spaced, 40 points a decade, 0.5 µs – 1 s)
//!    minimizing the sum of squared log errors of `X` over every saturation cell of 0 B echoes
//!    (every concurrency and pool). A stage the cells never show as the limit gets the smallest
//!    cost that fits as well (ties go to the cheaper stage cost).
//! 3. **Which stage pays per byte**: the fraction `f` of the per-byte slopes on the handler
//!    (the rest on the loop), from 1 down to 0 in steps of 0.05, minimizing the same error over
//!    the saturation cells of 1 MiB echoes; without such cells `f` = 1 (grpc-java parses and
//!    serializes on the handler's thread).
//!
//! `L` is split evenly between the request and the response direction (a loop's throughput
//! depends only on the sum); `H` is charged on the request.
//!
//! **The CPU stage** (step 0, before steps 2 and 3, when the target is on this machine): a cell
//! run on the target and on the baseline alike (same kind, sizes, connections and workers, under
//! load) measures the whole machine's CPU time per call on each (`/proc/stat`: client, DataNode
//! and all). Their difference is the CPU the target spends beyond dn-sim: per message from the
//! 0 B echoes, per response byte from the 1 MiB echoes, per request byte from the 1 MB writes (a
//! WriteChunk comes with its PutBlock: two messages). That much CPU dn-sim spends for real
//! (`[cpu.*]`), so the model adds `X ≤ cores / (machine CPU per call)` to the bounds above. Per
//! byte, the part on the handler is what step 1's slopes show (up to the whole), and step 1's
//! per-byte waits keep only what the handler's CPU does not already explain; per message, none:
//! the 0 B echo's latency at one request in flight beyond the baseline's is the latency floor's
//! (below), a wait that holds no handler. The rest is background, off the request's path. The price
//! holds at the baseline's load `u`, so dn-sim's burns may take no more than `u` cores together
//! (`[cpu.capacity] cores`, `u` averaged over the priced pairs): unbounded, they would fill the
//! cores the baseline left idle and serve the loaded 1 MiB echoes faster than the target did.
//!
//! **The latency floor** (`[latency] floor_us`, `jitter_mean_us`): the 0 B echo's latency at
//! one request in flight beyond the baseline's. dn-sim answers no request that found it idle
//! sooner than that after its arrival, holding nothing, so it shows at low load and vanishes
//! under load, where requests queue anyway. Its jitter, an exponential time beyond the floor, is
//! the target's p99 − p50 at one request in flight beyond the baseline's, ÷ ln 50 (an
//! exponential's p99 − p50 over its mean); the floor keeps the mean. The check
//! ([`FloorCheck`]) runs that echo on dn-sim with the profile and corrects both.

use crate::calibrate::sleep_tail::{self, Tail, TailCell};
use serde::{Deserialize, Serialize};

/// What a cell ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Echoes (`loadgen echo`), `resp_bytes` of response payload.
    Echo,
    /// Blocks written (`loadgen write`) in chunks of `req_bytes`.
    Write,
}

/// One measured cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub kind: Kind,
    /// The target's handler pool when it ran.
    pub pool: u32,
    pub clients: u32,
    pub threads: u32,
    /// Payload of a request (WriteChunk: the chunk) and of a response (echo).
    pub req_bytes: u64,
    pub resp_bytes: u64,
    /// An echo's `--sleep-time-ms` (0: none).
    #[serde(default)]
    pub sleep_ms: u32,
    pub calls_per_s: f64,
    /// Payload MB/s (MB = 2^20 bytes).
    pub mb_per_s: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Measured on the `--baseline` (a dn-sim without a profile), not on the target.
    #[serde(default)]
    pub baseline: bool,
    /// The whole machine's CPU time per call (ms) while the cell ran: client, target and
    /// anything else. Measured only when the target was on this machine.
    #[serde(default)]
    pub machine_cpu_ms_per_call: Option<f64>,
}

impl Cell {
    /// Requests in flight: loadgen's workers (`-t`, over all connections), one each.
    pub fn in_flight(&self) -> u32 {
        self.threads
    }

    /// Connections that carry requests (a worker uses one connection).
    pub fn active_connections(&self) -> u32 {
        self.clients.min(self.threads)
    }

    pub fn label(&self) -> String {
        let size = |b: u64| match b {
            0 => "0B".to_string(),
            b if b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
            b => format!("{}KiB", b >> 10),
        };
        match self.kind {
            Kind::Echo => format!(
                "echo resp={}{} pool={} {}x{}",
                size(self.resp_bytes),
                match self.sleep_ms {
                    0 => String::new(),
                    ms => format!(" sleep={ms}ms"),
                },
                self.pool,
                self.clients,
                self.threads
            ),
            Kind::Write => format!(
                "write chunk={} pool={} {}x{}",
                size(self.req_bytes),
                self.pool,
                self.clients,
                self.threads
            ),
        }
    }
}

/// Cells measured more than once (the same kind, pool, connections, workers, payloads, sleep
/// and target: e.g. on several starts of a real DataNode, given with `--with`) merged into one,
/// each number the geometric mean of its measurements: the prediction nearest to all of them in
/// ratio, which is how a prediction is judged. A real Ozone 2.2.0 DataNode's starts differ by
/// more than the twin's goals (`scripts/exp-real-starts.sh`), so one start is a poor target.
/// Returns the cells in the order each first appeared, and how many were merged away.
pub fn merge_repeats(cells: Vec<Cell>) -> (Vec<Cell>, usize) {
    type Shape = (Kind, u32, u32, u32, u64, u64, u32, bool);
    let shape = |c: &Cell| -> Shape {
        (
            c.kind,
            c.pool,
            c.clients,
            c.threads,
            c.req_bytes,
            c.resp_bytes,
            c.sleep_ms,
            c.baseline,
        )
    };
    let mut groups: Vec<(Shape, Vec<Cell>)> = Vec::new();
    for c in cells {
        let key = shape(&c);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(c),
            None => groups.push((key, vec![c])),
        }
    }
    let mut merged_away = 0;
    let geomean = |v: &[f64]| -> f64 {
        if v.iter().all(|x| *x > 0.0) {
            (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let out = groups
        .into_iter()
        .map(|(_, mut g)| {
            if g.len() == 1 {
                // Measured once: kept exactly as measured.
                return g.remove(0);
            }
            merged_away += g.len() - 1;
            let of = |f: fn(&Cell) -> f64| geomean(&g.iter().map(f).collect::<Vec<_>>());
            let cpu: Vec<f64> = g.iter().filter_map(|c| c.machine_cpu_ms_per_call).collect();
            Cell {
                calls_per_s: of(|c| c.calls_per_s),
                mb_per_s: of(|c| c.mb_per_s),
                mean_ms: of(|c| c.mean_ms),
                p50_ms: of(|c| c.p50_ms),
                p99_ms: of(|c| c.p99_ms),
                machine_cpu_ms_per_call: (!cpu.is_empty()).then(|| geomean(&cpu)),
                ..g[0].clone()
            }
        })
        .collect();
    (out, merged_away)
}

/// The fitted costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Fitted {
    pub cores: u32,
    /// Event loop µs per request and response together.
    pub loop_us: f64,
    /// Handler µs per command.
    pub handler_us: f64,
    /// ns per byte of a request, of a response (loop and handler together).
    pub req_ns_per_byte: f64,
    pub resp_ns_per_byte: f64,
    /// The handler's share of the per-byte cost.
    pub handler_byte_share: f64,
    /// CPU really spent (µs per message; ns per request byte, per response byte), on the
    /// handler and in the background: `[cpu.handler]`, `[cpu.background]`.
    pub cpu_handler: [f64; 3],
    pub cpu_background: [f64; 3],
    /// `[cpu.background] per_write_chunk_us`: a WriteChunk's CPU beyond its message and its
    /// bytes (0 without loaded writes of two sizes). In the background: a real DataNode's
    /// WriteChunk at one request in flight takes no longer than its bytes say (Ozone 2.2.0
    /// here: 64 KB 0.33 ms, 1 MB 3.9–4.5, 4 MB 18.5–19.3, a line through about 0).
    pub cpu_write_chunk_us: f64,
    /// `[cpu.capacity] cores`: the busy cores at which the CPU stage was priced (none without
    /// a CPU stage).
    pub cpu_capacity_cores: Option<f64>,
    /// `[cpu.echo_payload] per_byte_ns`: the handler's CPU a byte of an echo's payload that is
    /// spent under one lock for the whole DataNode (0 without a CPU stage or loaded echoes of
    /// a payload).
    pub echo_payload_ns_per_byte: f64,
    /// The loaded echo the lock was priced on (the check runs it on dn-sim too).
    pub echo_payload_cell: Option<Cell>,
    /// The check of the lock's price on a dn-sim that runs the profile.
    pub lock_check: Option<LockCheck>,
    /// `[handler.sleep] late_us`: how much longer than asked an echo's sleep holds the
    /// target's handler, beyond what dn-sim's own does (0 without sleep cells on both), and
    /// `late_per_ms_us`: how much later a millisecond more of sleep wakes (0 unless cells slept
    /// two lengths).
    pub sleep_late_us: f64,
    pub sleep_late_per_ms_us: f64,
    /// `[handler.sleep] tail_share`, `tail_mean_per_ms_us`: the few sleeps that wake much
    /// later (`calibrate::sleep_tail`), fitted on the sleeping cells' p99; its mean is part of
    /// the lateness above, taken from `sleep_late_per_ms_us` (and from `sleep_late_us` beyond).
    pub sleep_tail: Option<Tail>,
    /// `[latency] floor_us`: the 0 B echo's latency at one request in flight beyond the
    /// baseline's, less the jitter's mean (0 without a baseline).
    pub latency_floor_us: f64,
    /// `[latency] jitter_mean_us`: the mean of the exponential time beyond the floor (0
    /// without a baseline).
    pub latency_jitter_us: f64,
    /// The target's 0 B echo at one request in flight (what the floor's check compares; its
    /// mean is the echo's base latency).
    pub echo_base: Latencies,
    /// The check of the floor and its jitter on a dn-sim that runs the profile.
    pub floor_check: Option<FloorCheck>,
    /// WriteChunk's latency (ms) at one request in flight at 0 bytes.
    pub write_base_ms: f64,
    /// Latency (ms) at one request in flight of a 1 MiB echo on the target, the mean of its
    /// cells (what the check on dn-sim compares).
    pub echo_mib_ms: Option<f64>,
    /// Per cell: label, unit, measured, predicted.
    pub residuals: Vec<(String, &'static str, f64, f64)>,
    /// The check of the profile on dn-sim itself, when `loadgen calibrate` ran one.
    pub check: Option<Check>,
    /// The loaded 0 B echoes step 2 priced the loops and the handler on (the saturation check
    /// runs them on dn-sim too).
    pub saturation_cells: Vec<Cell>,
    /// Per saturation cell, the calls/s the CPU stage allows it at the fitted costs (infinite
    /// without a CPU stage).
    pub saturation_cpu_bounds: Vec<f64>,
    /// The check of the loops' and the handler's costs on a dn-sim that runs the profile.
    pub saturation_check: Option<SaturationCheck>,
}

/// The check of a fitted profile on a dn-sim that runs it (`loadgen calibrate`): the 1 MiB echo
/// at one request in flight, there and on the target.
///
/// Why: the fit puts on the handler all of the target's latency per response byte beyond the
/// baseline's, as CPU dn-sim burns; the background's share is burnt beside it. On few cores the
/// background's burns and dn-sim's own threads then slow that echo (1 MiB: 15.4 ms where the
/// model says 14.0 on 2 cores), which the target's latency already held once. The check moves
/// the excess of the handler's per-response-byte CPU to the background: the CPU per call, and so
/// the loaded cells, stay as fitted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Check {
    /// The target's latency, ms.
    pub target_ms: f64,
    /// dn-sim's latency with the profile of each check round, ms (the first: as fitted).
    pub rounds_ms: Vec<f64>,
    /// ns per response byte moved from the handler to the background when each round ran.
    pub rounds_moved: Vec<f64>,
    /// ns per response byte moved from the handler to the background, over all rounds.
    pub moved_ns_per_byte: f64,
    /// The round whose profile was kept (0-based), once the check has settled.
    pub kept: Option<usize>,
}

impl Check {
    /// One line: what the check measured and moved.
    pub fn summary(&self) -> String {
        let rounds: Vec<String> = self.rounds_ms.iter().map(|ms| format!("{ms:.2}")).collect();
        let kept = self.kept.map_or(String::new(), |k| {
            format!("round {}'s profile kept: ", k + 1)
        });
        format!(
            "Checked on dn-sim: 1 MiB echo at one request in flight {:.2} ms on the target, \
             {} ms on dn-sim with the profile (a check round each); {kept}{:.3} ns/response B \
             moved from the handler's CPU to the background's.",
            self.target_ms,
            rounds.join(", "),
            self.moved_ns_per_byte
        )
    }
}

/// A check round within this share of the target's latency ends the check.
pub const CHECK_TOLERANCE: f64 = 0.02;

/// A cell's mean, median and 99th percentile latency (ms).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Latencies {
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl Latencies {
    pub fn of(c: &Cell) -> Self {
        Self {
            mean_ms: c.mean_ms,
            p50_ms: c.p50_ms,
            p99_ms: c.p99_ms,
        }
    }

    fn spread_ms(&self) -> f64 {
        self.p99_ms - self.p50_ms
    }
}

/// An exponential time's p99 − p50 over its mean: ln 100 − ln 2.
const EXP_P99_LESS_P50: f64 = 3.912_023_005_428_146;

/// A floor check round whose p99 lies within this share of the target's (and whose mean within
/// [`CHECK_TOLERANCE`]) ends the check.
pub const FLOOR_P99_TOLERANCE: f64 = 0.10;

/// The check of the latency floor and its jitter on a dn-sim that runs the profile: the 0 B
/// echo at one request in flight, there and on the target.
///
/// Why: the floor counts from the request's arrival at dn-sim, so dn-sim's own time before it
/// is absorbed and the baseline's difference undershoots (a fit's 88.7 µs floor gave dn-sim
/// 5.0 k calls/s where a real Ozone 2.2.0 DataNode made 4.5 k); and the jitter adds to a spread
/// dn-sim already has. Each round moves the jitter by the p99 − p50 still missing ÷ ln 50 (÷ the
/// share of the last move that showed), and the floor by the mean still missing less what the
/// jitter's move adds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FloorCheck {
    pub target: Latencies,
    /// Per round: the floor and the jitter's mean it ran with (µs), and dn-sim's latencies.
    pub rounds: Vec<(f64, f64, Latencies)>,
    /// The round whose floor was kept (0-based), once settled.
    pub kept: Option<usize>,
}

impl FloorCheck {
    /// A round's error: the squared log ratios of its mean and its p99 to the target's, each
    /// in units of its goal (calls/s ±10 %, p99 ±25 %).
    fn error(&self, round: usize) -> f64 {
        let s = &self.rounds[round].2;
        let r = |a: f64, b: f64| (a.max(1e-9) / b.max(1e-9)).ln();
        (r(s.mean_ms, self.target.mean_ms) / 0.10).powi(2)
            + (r(s.p99_ms, self.target.p99_ms) / 0.25).powi(2)
    }

    pub fn summary(&self) -> String {
        let l = |x: &Latencies| format!("{:.3}/{:.3}/{:.3}", x.mean_ms, x.p50_ms, x.p99_ms);
        let rounds: Vec<String> = self
            .rounds
            .iter()
            .map(|(f, j, x)| format!("{} at {f:.1} + {j:.1} µs", l(x)))
            .collect();
        let kept = self
            .kept
            .map_or(String::new(), |k| format!("; round {}'s kept", k + 1));
        format!(
            "Latency floor checked on dn-sim (0 B echo at one request in flight, mean/p50/p99 ms; \
             floor + jitter's mean): {} on the target, {} on dn-sim{kept}.",
            l(&self.target),
            rounds.join(", ")
        )
    }
}

/// The check of the echo payload's lock on a dn-sim that runs the profile: the loaded echo the
/// lock was priced on, there and on the target.
///
/// Why: the price lets the target's rate through the lock if handing it over cost nothing, but
/// on dn-sim (as on the DataNode) a waiter woken at each release must first get a core that the
/// client, the background and the other handlers' burns share: priced at 6.1 ns/B from a real
/// Ozone 2.2.0 DataNode's 156 1 MiB echoes/s at 8 × 8, dn-sim made 125/s here. Each round scales
/// the price by dn-sim's rate over the target's, moving the difference between the lock and the
/// handler's CPU outside it (a single echo costs the same).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LockCheck {
    /// The target's calls/s.
    pub target_calls_per_s: f64,
    /// Per round: dn-sim's calls/s, and the lock's price (ns/B) it ran with.
    pub rounds: Vec<(f64, f64)>,
    /// The round whose price was kept (0-based), once settled.
    pub kept: Option<usize>,
}

impl LockCheck {
    pub fn summary(&self) -> String {
        let rounds: Vec<String> = self
            .rounds
            .iter()
            .map(|(x, ns)| format!("{x:.1} at {ns:.3} ns/B"))
            .collect();
        let kept = self
            .kept
            .map_or(String::new(), |k| format!("; round {}'s price kept", k + 1));
        format!(
            "Echo payload lock checked on dn-sim: {:.1} calls/s on the target, {} on dn-sim{kept}.",
            self.target_calls_per_s,
            rounds.join(", ")
        )
    }
}

/// The check of the event loops', the handler's and the CPU stage's costs per message on a
/// dn-sim that runs the profile: the loaded 0 B echoes step 2 priced them on, there and on the
/// target.
///
/// Why: the model takes a virtual stage's cost as the time it adds to what dn-sim spends, but
/// dn-sim's own work and its waits for the stage (timer wake-ups) take time too, so dn-sim can
/// serve less than the model says. From a real Ozone 2.2.0 DataNode's 0 B echoes a fit chose
/// 26.5 µs a message pair on the loop and 44.6 µs a command on the handler, which the model says
/// serve 37.7 k calls/s at pool 16, 32 × 32; dn-sim with them served 22.2 k where the DataNode
/// served 35.4 k (a fit of the same cells from another run chose none, and met them). Each round
/// scales each stage's cost by dn-sim's calls/s over the target's on the cells that stage limits
/// in the model (their geometric mean; the cells neither the CPU nor the other stage limits
/// when it limits none), unless those are within [`SATURATION_TOLERANCE`]; a cost below the
/// grid's floor becomes none.
///
/// The CPU stage's cost per message is corrected the way it was priced: where it limits cells,
/// by `u × (1 / X_target − 1 / X_dn-sim)` a message (`u` its capacity, the mean over those
/// cells), down to none. Why: a fit of a real Ozone 2.2.0 DataNode's cells put nothing on the
/// loops and the handler and 12.0 µs of CPU on each message, with which dn-sim served 27.5 k–
/// 35.6 k calls/s of 0 B echoes at 32 × 32 where the DataNode served 34.7 k (pool 2) and 40.1 k
/// (pool 10); a check that scaled only the loops and the handler had nothing to scale.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SaturationCheck {
    /// The target's calls/s, per cell of `Fitted::saturation_cells`.
    pub target_calls_per_s: Vec<f64>,
    /// Per cell: the stage that limits it in the model at the fitted costs.
    pub limits: Vec<Limit>,
    /// The CPU stage's capacity (busy cores) its per-message cost is corrected at.
    pub cpu_capacity_cores: f64,
    /// Per round: the costs it ran with, and dn-sim's calls/s per cell. The first round's are
    /// the fitted ones.
    pub rounds: Vec<(MessageCosts, Vec<f64>)>,
    /// The round whose costs were kept (0-based), once settled.
    pub kept: Option<usize>,
}

/// The costs a saturation check round runs with (µs): the loop's per message pair, the
/// handler's per command, the CPU stage's per message (in the background).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MessageCosts {
    pub loop_us: f64,
    pub handler_us: f64,
    pub cpu_us: f64,
}

/// The stage that limits a loaded cell in the model: the one with the least bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Loop,
    Handler,
    Cpu,
}

/// A stage whose cells ran within this share of the target's calls/s (geometric mean) in a
/// saturation check round is not scaled again: the goal's ±10 % leaves room for the machine's
/// noise.
pub const SATURATION_TOLERANCE: f64 = 0.05;

impl SaturationCheck {
    /// Per cell, the log of a round's calls/s over the target's.
    fn log_ratios(&self, round: usize) -> impl Iterator<Item = f64> + '_ {
        self.rounds[round]
            .1
            .iter()
            .zip(&self.target_calls_per_s)
            .map(|(s, t)| (s.max(1e-9) / t.max(1e-9)).ln())
    }

    /// The sum over cells of the squared log ratio of a round's calls/s to the target's.
    fn error(&self, round: usize) -> f64 {
        self.log_ratios(round).map(|r| r.powi(2)).sum()
    }

    /// The geometric mean of a round's calls/s over the target's, on the cells `which` takes.
    fn ratio(&self, round: usize, which: impl Fn(usize) -> bool) -> Option<f64> {
        mean(
            self.log_ratios(round)
                .enumerate()
                .filter(|(i, _)| which(*i))
                .map(|(_, r)| r),
        )
        .map(f64::exp)
    }

    /// The CPU stage's cost per message the round after `round` runs with: where it limits
    /// cells outside [`SATURATION_TOLERANCE`], corrected by `u × (1 / X_target − 1 / X_dn-sim)`
    /// averaged over them, never below none.
    fn next_cpu_us(&self, round: usize) -> f64 {
        let (costs, sim) = &self.rounds[round];
        let cpu = |i: usize| self.limits[i] == Limit::Cpu;
        let Some(r) = self.ratio(round, cpu) else {
            return costs.cpu_us;
        };
        if !r.is_finite() || r.ln().abs() <= (1.0 + SATURATION_TOLERANCE).ln() {
            return costs.cpu_us;
        }
        let delta_us = mean((0..sim.len()).filter(|&i| cpu(i)).map(|i| {
            let (t, s) = (self.target_calls_per_s[i], sim[i]);
            self.cpu_capacity_cores * (1.0 / t.max(1e-9) - 1.0 / s.max(1e-9)) * 1e6
        }))
        .unwrap_or(0.0);
        (costs.cpu_us + delta_us).max(0.0)
    }

    /// The costs the round after `round` runs with. A loop or handler still slow after its
    /// cost was cut, whose cells came less than a third of the way to the target's rate, gets
    /// none: there dn-sim's own time, not the cost, is what holds it back (a handler's 44.6 µs
    /// cut to 34.8 and 27.1 moved dn-sim's pool of 2 from 29.3 k to 30.4 k and 29.5 k calls/s,
    /// where the real DataNode served 37.9 k).
    fn next_costs(&self, round: usize) -> MessageCosts {
        // A stage that limits no cell follows the cells the CPU does not limit either: those
        // the CPU limits are its own to correct.
        let of = |round: usize, stage: Limit| {
            self.ratio(round, |i| self.limits[i] == stage)
                .or_else(|| self.ratio(round, |i| self.limits[i] != Limit::Cpu))
        };
        let floor = grid().next().unwrap_or(0.0);
        let tolerance = (1.0 + SATURATION_TOLERANCE).ln();
        let cost = |c: &MessageCosts, stage: Limit| match stage {
            Limit::Loop => c.loop_us,
            _ => c.handler_us,
        };
        let step = |stage: Limit| {
            let now = cost(&self.rounds[round].0, stage);
            let Some(r) = of(round, stage).filter(|r| r.is_finite() && *r > 0.0) else {
                return now;
            };
            if r.ln().abs() <= tolerance {
                return now;
            }
            let before = round.checked_sub(1).and_then(|p| {
                (cost(&self.rounds[p].0, stage) > now)
                    .then(|| of(p, stage))
                    .flatten()
            });
            if let Some(b) = before
                && r < 1.0
                && r.ln() - b.ln() < -b.ln() / 3.0
            {
                return 0.0;
            }
            let next = now * r;
            if next < floor { 0.0 } else { next }
        };
        MessageCosts {
            loop_us: step(Limit::Loop),
            handler_us: step(Limit::Handler),
            cpu_us: self.next_cpu_us(round),
        }
    }

    pub fn summary(&self) -> String {
        let targets: Vec<String> = self
            .target_calls_per_s
            .iter()
            .map(|x| format!("{x:.0}"))
            .collect();
        let rounds: Vec<String> = self
            .rounds
            .iter()
            .map(|(c, xs)| {
                let xs: Vec<String> = xs.iter().map(|x| format!("{x:.0}")).collect();
                format!(
                    "{} at {:.1} + {:.1} + {:.1} µs",
                    xs.join("/"),
                    c.loop_us,
                    c.handler_us,
                    c.cpu_us
                )
            })
            .collect();
        let kept = self
            .kept
            .map_or(String::new(), |k| format!("; round {}'s costs kept", k + 1));
        format!(
            "Loops, handler and CPU checked on dn-sim (loaded 0 B echoes, calls/s; costs: loop \
             per message pair + handler per command + CPU per message): {} on the target, {} on \
             dn-sim{kept} (the residuals above are the fit's, before this check).",
            targets.join("/"),
            rounds.join(", ")
        )
    }
}

/// The round of `rounds` whose `error` is least (the first of equals).
fn least_error(rounds: usize, error: impl Fn(usize) -> f64) -> Option<usize> {
    (0..rounds).min_by(|&a, &b| error(a).total_cmp(&error(b)))
}

/// The index of the value in `rounds` nearest `target` (the first of equals).
fn nearest(rounds: &[f64], target: f64) -> Option<usize> {
    (0..rounds.len()).min_by(|&a, &b| {
        (rounds[a] - target)
            .abs()
            .total_cmp(&(rounds[b] - target).abs())
    })
}

/// `XceiverServerGrpc`'s event loop count (Ozone 2.0.0–2.2.0): pool / 10, 0 → 2 × cores.
pub fn loops(pool: u32, cores: u32) -> u32 {
    match pool / 10 {
        0 => (2 * cores).max(1),
        n => n,
    }
}

/// The model's calls/s for a cell given the costs (µs) and, with a CPU stage, the calls/s the
/// machine's CPU allows.
fn predict(
    c: &Cell,
    cores: u32,
    r_ms: f64,
    loop_us: f64,
    handler_us: f64,
    by_cpu: Option<f64>,
) -> f64 {
    let n = f64::from(c.in_flight().max(1));
    let by_latency = n / (r_ms.max(1e-6) / 1e3);
    let by_loops =
        f64::from(loops(c.pool, cores).min(c.active_connections().max(1))) / (loop_us * 1e-6);
    let by_handlers = f64::from(c.pool.min(c.in_flight().max(1))) / (handler_us * 1e-6);
    let by_cpu = by_cpu.unwrap_or(f64::INFINITY);
    by_latency.min(by_loops).min(by_handlers).min(by_cpu)
}

/// The CPU stage: what a call costs the machine on the target beyond the baseline, under load.
#[derive(Clone, Debug, Default, PartialEq)]
struct Cpu {
    /// µs per message, ns per request byte, ns per response byte: the total, and the part on
    /// the handler (what the latency at one request in flight shows of it).
    total: [f64; 3],
    handler: [f64; 3],
    /// µs a WriteChunk costs beyond its message and its bytes, all in the background.
    write_chunk_us: f64,
    /// Per cell shape (kind, bytes, clients, threads) the baseline ran: its busy cores and
    /// calls/s.
    base: Vec<(Shape, (f64, f64))>,
    /// The baseline's busy cores, averaged over the pairs the stage was priced on: the load at
    /// which the price holds, dn-sim's `[cpu.capacity] cores`.
    capacity: f64,
}

/// What makes two cells comparable: kind, request and response bytes, connections, workers.
type Shape = (Kind, u64, u64, u32, u32);

fn shape(c: &Cell) -> Shape {
    (c.kind, c.req_bytes, c.resp_bytes, c.clients, c.threads)
}

/// `loadgen write`'s default `--flush-size`, which calibrate's writes keep: a PutBlock every
/// this many bytes.
const FLUSH_BYTES: f64 = (16u64 << 20) as f64;

/// Messages a cell's call is: a WriteChunk comes with its share of a PutBlock.
fn messages(c: &Cell) -> f64 {
    match c.kind {
        Kind::Echo => 1.0,
        Kind::Write => 1.0 + c.req_bytes as f64 / FLUSH_BYTES,
    }
}

/// µs a call of cell `c`'s kind and sizes costs at `costs` (µs per message, ns per request
/// byte, ns per response byte).
fn call_us(costs: [f64; 3], c: &Cell) -> f64 {
    messages(c) * costs[0] + (costs[1] * c.req_bytes as f64 + costs[2] * c.resp_bytes as f64) / 1e3
}

impl Cpu {
    /// CPU µs the stage spends on a call of cell `c`'s kind and sizes.
    fn burn_us(&self, c: &Cell) -> f64 {
        call_us(self.total, c)
            + match c.kind {
                Kind::Write => self.write_chunk_us,
                Kind::Echo => 0.0,
            }
    }

    /// The calls/s of `c`'s shape that the machine's CPU allows with the stage, when the
    /// baseline ran that shape: its time per call at its load, plus the stage's burn.
    fn bound(&self, c: &Cell) -> Option<f64> {
        let key = shape(c);
        let (busy, x) = self.base.iter().find(|(k, _)| *k == key)?.1;
        Some(1.0 / (1.0 / x + self.burn_us(c) / 1e6 / busy.max(1e-9)))
    }

    fn background(&self) -> [f64; 3] {
        [0, 1, 2].map(|i| (self.total[i] - self.handler[i]).max(0.0))
    }
}

/// A target cell counts for the CPU stage only when it kept the machine at least this busy,
/// relative to the baseline's same cell: below, something other than the CPU limited it.
const SATURATED: f64 = 0.8;

/// Step 0: the CPU stage from loaded cells run on the target and on the baseline alike, with
/// the machine's CPU measured (the target on this machine). `None` without a 0 B echo pair.
///
/// A pair's CPU is what makes dn-sim serve the target's rate where the baseline served its own,
/// at the baseline's machine load `u` (busy cores): `u × (1 / X_target − 1 / X_baseline)` a
/// call. That is the difference of machine CPU per call when both keep the machine equally busy,
/// and it leaves out the target's idle gaps (a JVM's pauses) that a difference of measured CPU
/// would miss.
///
/// The price per message comes from the pools that had Netty's default group of 2 × cores
/// event loops (pools under 10), when any was measured: where the DataNode had one loop for all
/// connections (pools 10–19), that loop, not the CPU, limited it (Ozone 2.2.0 here: the same
/// calls/s as the baseline at pool 2, 13 % fewer at pool 10, its one loop thread at 74 % of a
/// core), and an average over both pools charged the loop's loss as CPU to every pool, which
/// made dn-sim slower than the DataNode at small pools. The loop stage prices that loss.
fn cpu_stage(target: &[&Cell], base: &[&Cell], cores: u32) -> Option<Cpu> {
    let mut cpu = Cpu::default();
    let mut pairs: Vec<(&Cell, f64)> = Vec::new(); // target cell, its CPU µs beyond the baseline
    let mut priced_at = Vec::new(); // each pair's baseline busy cores
    let busy = |c: &Cell, ms: f64| ms * c.calls_per_s / 1e3;
    for b in base.iter().filter(|c| c.in_flight() > 1) {
        let Some(b_ms) = b.machine_cpu_ms_per_call else {
            continue;
        };
        let b_busy = busy(b, b_ms);
        cpu.base.push((shape(b), (b_busy, b.calls_per_s)));
        for t in target.iter().filter(|t| shape(t) == shape(b)) {
            let Some(t_ms) = t.machine_cpu_ms_per_call else {
                continue;
            };
            if busy(t, t_ms) >= SATURATED * b_busy {
                let us = b_busy * (1.0 / t.calls_per_s - 1.0 / b.calls_per_s) * 1e6;
                pairs.push((t, us));
                priced_at.push(b_busy);
            }
        }
    }
    cpu.capacity = mean(priced_at.into_iter())?;
    let small = |(c, _): &&(&Cell, f64)| c.kind == Kind::Echo && c.resp_bytes == 0;
    let many_loops = |(c, _): &&(&Cell, f64)| loops(c.pool, cores) >= 2 * cores.max(1);
    let msg = mean(pairs.iter().filter(small).filter(many_loops).map(|p| p.1))
        .or_else(|| mean(pairs.iter().filter(small).map(|p| p.1)))?
        .max(0.0);
    let per_byte = |kind: Kind, bytes: fn(&Cell) -> u64| {
        mean(
            pairs
                .iter()
                .filter(|(c, _)| c.kind == kind && bytes(c) > 0)
                .map(|(c, us)| (us - messages(c) * msg) * 1e3 / bytes(c) as f64),
        )
        .unwrap_or(0.0)
        .max(0.0)
    };
    // WriteChunks of two sizes or more: a line over the chunk's bytes, whose intercept is what
    // a WriteChunk costs beyond its bytes (a real Ozone 2.2.0 DataNode's 64 KB writes at 4 x 4
    // made 0.69 x the MB/s of a dn-sim priced per byte from 1 MB writes alone).
    let writes: Vec<(f64, f64)> = pairs
        .iter()
        .filter(|(c, _)| c.kind == Kind::Write && c.req_bytes > 0)
        .map(|(c, us)| (c.req_bytes as f64, us - messages(c) * msg))
        .collect();
    // Without an intercept above none, the line through the origin (least squares: the larger
    // chunks weigh the more, as their bytes are the more of the cost).
    let (write_chunk_us, req_ns) = match line(&writes) {
        Some((intercept, slope)) if intercept > 0.0 && slope > 0.0 => (intercept, slope * 1e3),
        _ => (
            0.0,
            origin_slope(&writes).map_or(0.0, |s| (s * 1e3).max(0.0)),
        ),
    };
    cpu.write_chunk_us = write_chunk_us;
    cpu.total = [msg, req_ns, per_byte(Kind::Echo, |c| c.resp_bytes)];
    Some(cpu)
}

fn grid() -> impl Iterator<Item = f64> + Clone {
    // 0.5 µs … 1 s, 40 points a decade.
    (0..=252).map(|k| 0.5 * 10f64.powf(f64::from(k) / 40.0))
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

/// The least-squares slope of a line through the origin and `(x, y)` points (none without an
/// `x` other than 0).
fn origin_slope(points: &[(f64, f64)]) -> Option<f64> {
    let sxx: f64 = points.iter().map(|p| p.0 * p.0).sum();
    let sxy: f64 = points.iter().map(|p| p.0 * p.1).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Least-squares line through `(x, y)` points: (intercept, slope).
fn line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| {
        let slope = sxy / sxx;
        (my - slope * mx, slope)
    })
}

/// Mean latency (ms) of echoes of `resp` bytes at one request in flight.
fn single(cells: &[&Cell], resp: u64) -> Option<f64> {
    single_latencies(cells, resp).map(|l| l.mean_ms)
}

/// The latencies of echoes of `resp` bytes at one request in flight, the mean of their cells.
fn single_latencies(cells: &[&Cell], resp: u64) -> Option<Latencies> {
    let of: Vec<&&Cell> = cells
        .iter()
        .filter(|c| c.kind == Kind::Echo && c.in_flight() == 1)
        .filter(|c| c.resp_bytes == resp && c.req_bytes == 0)
        .collect();
    Some(Latencies {
        mean_ms: mean(of.iter().map(|c| c.mean_ms))?,
        p50_ms: mean(of.iter().map(|c| c.p50_ms))?,
        p99_ms: mean(of.iter().map(|c| c.p99_ms))?,
    })
}

/// At one request in flight: the response's ns per byte (0 B vs 1 MiB echoes), WriteChunk's
/// latency at 0 bytes (ms) and the request's ns per byte (the line over chunk sizes).
fn slopes(cells: &[&Cell], echo_base_ms: f64) -> (f64, f64, f64) {
    let mib = (1u64 << 20) as f64;
    let resp =
        single(cells, 1 << 20).map_or(0.0, |big| ((big - echo_base_ms) * 1e6 / mib).max(0.0));
    let writes: Vec<(f64, f64)> = cells
        .iter()
        .filter(|c| c.kind == Kind::Write && c.in_flight() == 1)
        .map(|c| (c.req_bytes as f64, c.mean_ms))
        .collect();
    let (base, req) = match line(&writes) {
        Some((b, s)) => (b.max(0.0), (s * 1e6).max(0.0)),
        None => (writes.first().map_or(0.0, |w| w.1), 0.0),
    };
    (resp, base, req)
}

/// The baseline's response ns per byte after its client waited idle as long as the target kept
/// it waiting: the slope between its echoes of 0 B and 1 MiB at one request in flight that slept
/// the same time on the handler. A client that waited moves the bytes slower than one that never
/// stops (its cores idled); the target's latency includes that, and so does dn-sim's with a
/// profile, so the per-byte cost it adds must not include it again.
fn idle_resp_slope(slept: &[&Cell]) -> Option<f64> {
    let echo = |resp: u64, ms: u32| {
        slept.iter().find(|c| {
            c.baseline
                && c.kind == Kind::Echo
                && c.in_flight() == 1
                && c.req_bytes == 0
                && c.resp_bytes == resp
                && c.sleep_ms == ms
        })
    };
    let big = slept
        .iter()
        .filter(|c| c.baseline && c.in_flight() == 1 && c.resp_bytes == 1 << 20)
        .find(|c| echo(0, c.sleep_ms).is_some())?;
    let small = echo(0, big.sleep_ms)?;
    Some(((big.mean_ms - small.mean_ms) * 1e6 / (1u64 << 20) as f64).max(0.0))
}

/// Fits `cells` for a machine of `cores`. Errors name what is missing.
pub fn fit(cells: &[Cell], cores: u32) -> Result<Fitted, String> {
    // Echoes that slept fit only how late a sleeping handler wakes (step 4); the other steps
    // never see them.
    let (slept, cells): (Vec<&Cell>, Vec<&Cell>) = cells.iter().partition(|c| c.sleep_ms > 0);
    let (target, base): (Vec<&Cell>, Vec<&Cell>) = cells.into_iter().partition(|c| !c.baseline);
    let echo_base = single_latencies(&target, 0)
        .ok_or("no echo cell of 0 B at one request in flight (1 connection x 1 worker)")?;
    let echo_base_ms = echo_base.mean_ms;
    let mib = 1u64 << 20;
    // Step 1: per byte, less the baseline's (the client's and the transport's share).
    let (t_resp, t_write_ms, t_req) = slopes(&target, echo_base_ms);
    let base_single = single(&base, 0);
    let (mut resp_ns_per_byte, mut req_ns_per_byte) = match base_single {
        Some(b0) => {
            let (b_resp, _, b_req) = slopes(&base, b0);
            let b_resp = idle_resp_slope(&slept).unwrap_or(b_resp);
            ((t_resp - b_resp).max(0.0), (t_req - b_req).max(0.0))
        }
        None => (t_resp, t_req),
    };
    // Step 0: the CPU stage. Per byte the handler's part is what the latency at one request in
    // flight shows beyond the baseline's (up to the whole), and the per-byte waits keep only the
    // rest. Per message none: that latency is the floor's, which holds no handler. Priced as
    // the handler's CPU as well (as it was), it held each request's handler for a burn that at
    // pool 1 the others queued behind: with a run's 6.4 µs a message on the handler dn-sim's
    // pool of one served 32.4 k / 30.9 k / 35.4 k calls/s of 0 B echoes at 32 × 32, with it in
    // the background 33.0 k / 38.5 k / 39.0 k (alternating), about its pool of 16's, as the
    // real DataNode's pool of one served 0.90–1.17 × its pool of 16 over three runs.
    let mut cpu = cpu_stage(&target, &base, cores);
    if let Some(cpu) = &mut cpu {
        cpu.handler = [
            0.0,
            req_ns_per_byte.min(cpu.total[1]),
            resp_ns_per_byte.min(cpu.total[2]),
        ];
        req_ns_per_byte -= cpu.handler[1];
        resp_ns_per_byte -= cpu.handler[2];
    }
    let cpu_bound = |c: &Cell| cpu.as_ref().and_then(|cpu| cpu.bound(c));
    // The handler's CPU holds it like its own time.
    let handler_cpu_us = |c: &Cell| cpu.as_ref().map_or(0.0, |cpu| call_us(cpu.handler, c));
    let write_base_ms = t_write_ms;
    let cells = &target[..];
    // Step 2: per message, on 0 B echoes.
    // With a CPU stage, only the cells whose CPU bound is known: below saturation the knee of
    // the curve is the machine's (dn-sim shares the CPU for real), not a loop's or a handler's.
    let small: Vec<&Cell> = cells
        .iter()
        .copied()
        .filter(|c| c.kind == Kind::Echo && c.resp_bytes == 0 && c.req_bytes == 0)
        .filter(|c| cpu.is_none() || cpu_bound(c).is_some())
        .collect();
    let loss = |set: &[&Cell], r_ms: f64, l: f64, h: f64| -> f64 {
        set.iter()
            .map(|c| {
                let x = predict(c, cores, r_ms, l, h + handler_cpu_us(c), cpu_bound(c));
                (x / c.calls_per_s.max(1e-9)).ln().powi(2)
            })
            .sum()
    };
    let mut best = (f64::INFINITY, 0.0, 0.0);
    let mut losses = Vec::new();
    for l in grid() {
        for h in grid() {
            let e = loss(&small, echo_base_ms, l, h);
            losses.push((e, l, h));
            if e < best.0 - 1e-12 {
                best = (e, l, h);
            }
        }
    }
    // With a CPU stage the loops and the handler must earn their place: the cheapest costs
    // within 5 % (root mean square) of the best fit, and none at all at the grid's floor (each
    // message a loop or handler queues costs dn-sim a timer wake-up). 10 % let a one-loop pool
    // 12 % below the CPU's bound go unexplained (Ozone 2.2.0 here, pool 10).
    if cpu.is_some() {
        let tolerance = best.0 + small.len() as f64 * 1.05f64.ln().powi(2);
        if let Some(&(e, l, h)) = losses
            .iter()
            .filter(|(e, ..)| *e <= tolerance)
            .min_by(|a, b| (a.1 + a.2).total_cmp(&(b.1 + b.2)))
        {
            let floor = |v: f64| {
                if v <= grid().next().unwrap_or(0.0) {
                    0.0
                } else {
                    v
                }
            };
            best = (e, floor(l), floor(h));
        }
    }
    let (_, loop_us, handler_us) = best;
    // Step 3: who pays per byte, on 1 MiB echoes under load.
    let big: Vec<&Cell> = cells
        .iter()
        .copied()
        .filter(|c| c.kind == Kind::Echo && c.resp_bytes == mib && c.in_flight() > 1)
        .collect();
    let big_ms = single(cells, mib).unwrap_or(echo_base_ms);
    let byte_us = resp_ns_per_byte * mib as f64 / 1e3;
    let mut share = (f64::INFINITY, 1.0);
    for k in (0..=20).rev() {
        let f = f64::from(k) / 20.0;
        let e = loss(
            &big,
            big_ms,
            loop_us + (1.0 - f) * byte_us,
            handler_us + f * byte_us,
        );
        if e < share.0 - 1e-12 {
            share = (e, f);
        }
    }
    let handler_byte_share = share.1;
    // Step 4: how late a handler wakes from an echo's sleep. A handler of a saturated pool is
    // held `min(P, N) / X` a call; beyond the sleep, the baseline's hold is dn-sim's own, and
    // the profile adds the handler's cost and its CPU: the rest of the target's is lateness.
    let busy_handlers = |c: &Cell| f64::from(c.pool.min(c.in_flight()).max(1));
    let hold_us =
        |c: &Cell| busy_handlers(c) / c.calls_per_s.max(1e-9) * 1e6 - f64::from(c.sleep_ms) * 1e3;
    let own_us = handler_us + cpu.as_ref().map_or(0.0, |c| c.handler[0]);
    let sleep_triples: Vec<(&Cell, f64, &Cell)> = slept
        .iter()
        .filter(|t| !t.baseline)
        .filter_map(|t| {
            slept
                .iter()
                .find(|b| b.baseline && b.sleep_ms == t.sleep_ms && shape(b) == shape(t))
                .map(|b| (*t, hold_us(b), *b))
        })
        .collect();
    let (sleep_late_us, sleep_late_per_ms_us) = late_line(
        &sleep_triples
            .iter()
            .map(|(t, b, _)| (f64::from(t.sleep_ms), hold_us(t) - b - own_us))
            .collect::<Vec<_>>(),
    );
    // Step 5: the lateness's tail, from the sleeping cells' p99 beyond their p50 (beyond the
    // baseline's own), its mean taken from the even lateness so that calls/s stay.
    let tail_cells: Vec<TailCell> = sleep_triples
        .iter()
        .map(|(t, _, b)| TailCell {
            pool: t.pool,
            in_flight: t.in_flight(),
            sleep_ms: t.sleep_ms,
            hold_us: busy_handlers(t) / t.calls_per_s.max(1e-9) * 1e6,
            excess_ms: ((t.p99_ms - t.p50_ms) - (b.p99_ms - b.p50_ms)).max(0.0),
        })
        .collect();
    // The tail's mean a millisecond comes out of the line's slope, and beyond it out of its
    // intercept at the longest sleep (the lateness there stays; shorter sleeps lose a little).
    let longest_ms = f64::from(tail_cells.iter().map(|c| c.sleep_ms).max().unwrap_or(0));
    let sleep_tail = (longest_ms > 0.0)
        .then(|| {
            sleep_tail::fit_tail(
                &tail_cells,
                sleep_late_per_ms_us + sleep_late_us / longest_ms,
            )
        })
        .flatten();
    let tail_per_ms_us = sleep_tail.map_or(0.0, |t| t.mean_late_per_ms_us());
    let (sleep_late_us, sleep_late_per_ms_us) = if tail_per_ms_us <= sleep_late_per_ms_us {
        (sleep_late_us, sleep_late_per_ms_us - tail_per_ms_us)
    } else {
        (
            (sleep_late_us - (tail_per_ms_us - sleep_late_per_ms_us) * longest_ms).max(0.0),
            0.0,
        )
    };
    // An echo's payload is made under one lock for the whole DataNode (its SecureRandom's
    // SHA1PRNG, `synchronized`): priced at what lets the fastest loaded echo of a payload run
    // through that lock alone, at most the handler's CPU a response byte (the lock's work is
    // part of it, taken out of it below).
    let echo_payload = cpu.as_ref().and_then(|cpu| {
        let fastest = cells
            .iter()
            .filter(|c| c.kind == Kind::Echo && c.resp_bytes > 0 && c.in_flight() > 1)
            .max_by(|a, b| {
                (a.calls_per_s * a.resp_bytes as f64)
                    .total_cmp(&(b.calls_per_s * b.resp_bytes as f64))
            })?;
        let ns =
            (1e9 / (fastest.calls_per_s.max(1e-9) * fastest.resp_bytes as f64)).min(cpu.handler[2]);
        (ns > 0.0).then(|| ((*fastest).clone(), ns))
    });
    let echo_payload_ns_per_byte = echo_payload.as_ref().map_or(0.0, |p| p.1);
    let echo_payload_cell = echo_payload.map(|p| p.0);
    let payload_bound = |c: &Cell| {
        if c.kind == Kind::Echo && c.resp_bytes > 0 && echo_payload_ns_per_byte > 0.0 {
            1e9 / (echo_payload_ns_per_byte * c.resp_bytes as f64)
        } else {
            f64::INFINITY
        }
    };
    // Residuals: every cell against the fitted model.
    let mut residuals: Vec<(String, &'static str, f64, f64)> = cells
        .iter()
        .map(|c| match c.kind {
            Kind::Echo => {
                let b = c.resp_bytes as f64;
                let (l, h) = (
                    loop_us + (1.0 - handler_byte_share) * resp_ns_per_byte * b / 1e3,
                    handler_us + handler_byte_share * resp_ns_per_byte * b / 1e3,
                );
                let r = echo_base_ms + t_resp * b / 1e6;
                let x = predict(c, cores, r, l, h + handler_cpu_us(c), cpu_bound(c))
                    .min(payload_bound(c));
                (c.label(), "calls/s", c.calls_per_s, x)
            }
            Kind::Write => {
                // Step 1's line: WriteChunk's latency at one request in flight; under load,
                // WriteChunks a second.
                let b = c.req_bytes as f64;
                let r = write_base_ms + t_req * b / 1e6;
                if c.in_flight() == 1 {
                    (c.label(), "WriteChunk mean ms", c.mean_ms, r)
                } else {
                    let n = f64::from(c.in_flight());
                    let x = (n / (r.max(1e-6) / 1e3)).min(cpu_bound(c).unwrap_or(f64::INFINITY));
                    (c.label(), "WriteChunk calls/s", c.calls_per_s, x)
                }
            }
        })
        .collect();
    residuals.extend(sleep_triples.iter().map(|(t, base_hold_us, _)| {
        let late_us =
            sleep_late_us + (sleep_late_per_ms_us + tail_per_ms_us) * f64::from(t.sleep_ms);
        let held_us = f64::from(t.sleep_ms) * 1e3 + base_hold_us + own_us + late_us;
        let x = busy_handlers(t) / (held_us.max(1e-3) / 1e6);
        (t.label(), "calls/s", t.calls_per_s, x)
    }));
    residuals.extend(sleep_triples.iter().zip(&tail_cells).enumerate().map(
        |(i, ((t, _, _), c))| {
            let predicted = sleep_tail::tail_excess_ms(
                c,
                sleep_tail.unwrap_or(Tail::NONE),
                sleep_tail::seed(i),
            );
            (
                t.label(),
                "p99 - p50 ms beyond the baseline's (the tail's)",
                c.excess_ms,
                predicted,
            )
        },
    ));
    let (mut cpu_handler, cpu_background) = cpu
        .as_ref()
        .map_or(([0.0; 3], [0.0; 3]), |c| (c.handler, c.background()));
    let cpu_write_chunk_us = cpu.as_ref().map_or(0.0, |c| c.write_chunk_us);
    cpu_handler[2] -= echo_payload_ns_per_byte;
    // The loaded 0 B echoes step 2 priced the loops and the handler on: the saturation check's.
    let loaded: Vec<&Cell> = small
        .iter()
        .copied()
        .filter(|c| c.in_flight() > 1)
        .collect();
    let cpu_capacity_cores = cpu
        .as_ref()
        .map(|c| c.capacity.clamp(0.01, f64::from(cores.max(1))));
    // The floor and its jitter: the target's mean and spread at one request in flight beyond
    // the baseline's.
    let (latency_floor_us, latency_jitter_us) = match single_latencies(&base, 0) {
        Some(b) => {
            // No more jitter than the mean leaves room for: calls/s are the tighter goal.
            let beyond = ((echo_base_ms - b.mean_ms) * 1e3).max(0.0);
            let jitter = ((echo_base.spread_ms() - b.spread_ms()) * 1e3 / EXP_P99_LESS_P50)
                .clamp(0.0, beyond);
            (beyond - jitter, jitter)
        }
        None => (0.0, 0.0),
    };
    Ok(Fitted {
        cores,
        cpu_capacity_cores,
        echo_payload_ns_per_byte,
        echo_payload_cell,
        lock_check: None,
        loop_us,
        handler_us,
        req_ns_per_byte,
        resp_ns_per_byte,
        handler_byte_share,
        cpu_handler,
        cpu_background,
        cpu_write_chunk_us,
        sleep_late_us,
        sleep_late_per_ms_us,
        sleep_tail,
        latency_floor_us,
        latency_jitter_us,
        echo_base,
        floor_check: None,
        write_base_ms,
        echo_mib_ms: single(cells, mib),
        residuals,
        check: None,
        saturation_cpu_bounds: loaded
            .iter()
            .map(|c| cpu_bound(c).unwrap_or(f64::INFINITY))
            .collect(),
        saturation_cells: loaded.into_iter().cloned().collect(),
        saturation_check: None,
    })
}

/// The line `late = a + b × ms` (µs) through how late sleeps of `(ms, late_us)` woke, by least
/// squares, neither part below 0: sleeps of one length give their mean lateness and no slope.
/// Why a line: a real DataNode's `Thread.sleep` wakes the later the longer it slept (Ozone 2.2.0
/// here, pool 1: 0.12 ms late after 1 ms, 0.16 after 2, 0.42 after 5); one number priced at 5 ms
/// made every 1–2 ms sleep about 0.1 ms too long.
fn late_line(points: &[(f64, f64)]) -> (f64, f64) {
    let Some(mean_late) = mean(points.iter().map(|p| p.1)) else {
        return (0.0, 0.0);
    };
    match line(points) {
        Some((intercept, slope)) if slope > 0.0 && intercept >= 0.0 => (intercept, slope),
        Some((_, slope)) if slope > 0.0 => (0.0, origin_slope(points).unwrap_or(0.0).max(0.0)),
        _ => (mean_late.max(0.0), 0.0),
    }
}

impl Fitted {
    /// Whether the profile has a CPU stage whose response bytes a check can move.
    pub fn checkable(&self) -> bool {
        self.echo_mib_ms.is_some() && self.cpu_handler[2] + self.cpu_background[2] > 0.0
    }

    /// Takes one check round: dn-sim answered the 1 MiB echo at one request in flight in
    /// `sim_ms` with this profile. Unless that is within [`CHECK_TOLERANCE`] of the target's,
    /// moves the excess (ns per response byte) from the handler's CPU to the background's, or
    /// back when dn-sim was the faster, within what each part has. Returns whether another
    /// round may change the profile.
    pub fn check_round(&mut self, sim_ms: f64) -> bool {
        let Some(target_ms) = self.echo_mib_ms else {
            return false;
        };
        let check = self.check.get_or_insert_with(|| Check {
            target_ms,
            ..Check::default()
        });
        check.rounds_ms.push(sim_ms);
        check.rounds_moved.push(check.moved_ns_per_byte);
        let excess_ms = sim_ms - target_ms;
        if !excess_ms.is_finite() || excess_ms.abs() <= CHECK_TOLERANCE * target_ms {
            return false;
        }
        let ns = (excess_ms * 1e6 / (1u64 << 20) as f64)
            .clamp(-self.cpu_background[2], self.cpu_handler[2]);
        self.cpu_handler[2] -= ns;
        self.cpu_background[2] += ns;
        check.moved_ns_per_byte += ns;
        ns != 0.0
    }

    /// Ends the check: keeps the profile of the round measured nearest the target's latency.
    ///
    /// Why: a round's move is computed from one measurement on a shared machine (a 1 MiB echo
    /// on dn-sim varied by ±1 ms between check rounds here), so the last move may overshoot and
    /// is never measured itself; a profile whose round was measured is a checked one.
    pub fn settle_check(&mut self) {
        let Some(check) = self.check.as_mut() else {
            return;
        };
        let Some(best) = nearest(&check.rounds_ms, check.target_ms) else {
            return;
        };
        let shift = check.rounds_moved[best] - check.moved_ns_per_byte;
        self.cpu_handler[2] -= shift;
        self.cpu_background[2] += shift;
        check.moved_ns_per_byte = check.rounds_moved[best];
        check.kept = Some(best);
    }

    /// The stage that limits each saturation cell in the model at the costs as they stand:
    /// the least of the loops', the handlers' (their own cost and their CPU) and the CPU
    /// stage's bounds; the handlers' among equals.
    fn saturation_limits(&self) -> Vec<Limit> {
        let bound = |n: u32, us: f64| {
            if us > 0.0 {
                f64::from(n) / us * 1e6
            } else {
                f64::INFINITY
            }
        };
        let (l, h) = (self.loop_us, self.handler_us + self.cpu_handler[0]);
        self.saturation_cells
            .iter()
            .zip(&self.saturation_cpu_bounds)
            .map(|(c, &cpu)| {
                let loops = loops(c.pool, self.cores).min(c.active_connections().max(1));
                let by_loop = bound(loops, l);
                let by_handler = bound(c.pool.min(c.in_flight()).max(1), h);
                if cpu < by_loop.min(by_handler) {
                    Limit::Cpu
                } else if by_loop < by_handler {
                    Limit::Loop
                } else {
                    Limit::Handler
                }
            })
            .collect()
    }

    /// The CPU stage's cost per message (the background's: the fit puts none on the handler).
    fn cpu_message_us(&self) -> f64 {
        self.cpu_background[0]
    }

    /// Whether the saturation check has anything to scale: loops or a handler that cost, or a
    /// CPU stage that limits one of the cells they were priced on.
    pub fn saturation_checkable(&self) -> bool {
        !self.saturation_cells.is_empty()
            && (self.loop_us + self.handler_us > 0.0
                || self.saturation_limits().contains(&Limit::Cpu))
    }

    /// Records a round of the saturation check: dn-sim ran `Fitted::saturation_cells` at
    /// `sim_calls_per_s` with the costs as they stand. Returns whether another round is worth
    /// running (dn-sim off the target by more than [`SATURATION_TOLERANCE`], and the costs
    /// moved); sets the costs for it.
    pub fn saturation_check_round(&mut self, sim_calls_per_s: Vec<f64>) -> bool {
        if self.saturation_check.is_none() {
            self.saturation_check = Some(SaturationCheck {
                target_calls_per_s: self
                    .saturation_cells
                    .iter()
                    .map(|c| c.calls_per_s)
                    .collect(),
                limits: self.saturation_limits(),
                cpu_capacity_cores: self.cpu_capacity_cores.unwrap_or(0.0),
                ..SaturationCheck::default()
            });
        }
        let costs = MessageCosts {
            loop_us: self.loop_us,
            handler_us: self.handler_us,
            cpu_us: self.cpu_message_us(),
        };
        let check = self.saturation_check.as_mut().expect("set above");
        check.rounds.push((costs, sim_calls_per_s));
        let next = check.next_costs(check.rounds.len() - 1);
        if next == costs {
            return false;
        }
        self.set_message_costs(next);
        true
    }

    /// Ends the saturation check: keeps the costs of the round whose dn-sim ran nearest the
    /// target (least sum of squared log errors over the cells).
    pub fn settle_saturation_check(&mut self) {
        let Some(check) = self.saturation_check.as_mut() else {
            return;
        };
        let Some(best) = least_error(check.rounds.len(), |r| check.error(r)) else {
            return;
        };
        check.kept = Some(best);
        let costs = check.rounds[best].0;
        self.set_message_costs(costs);
    }

    /// Sets the loops', the handler's and the CPU stage's per-message costs (the CPU's is the
    /// background's: the fit puts none of it on the handler).
    fn set_message_costs(&mut self, costs: MessageCosts) {
        self.loop_us = costs.loop_us;
        self.handler_us = costs.handler_us;
        self.cpu_background[0] = costs.cpu_us;
    }

    /// Records a round of the lock's check: dn-sim ran the priced echo at `sim_calls_per_s`.
    /// Returns whether another round is worth running (dn-sim off the target's rate by more
    /// than [`CHECK_TOLERANCE`], and the price moved).
    pub fn lock_check_round(&mut self, sim_calls_per_s: f64) -> bool {
        let Some(cell) = &self.echo_payload_cell else {
            return false;
        };
        let check = self.lock_check.get_or_insert_with(|| LockCheck {
            target_calls_per_s: cell.calls_per_s,
            ..LockCheck::default()
        });
        check
            .rounds
            .push((sim_calls_per_s, self.echo_payload_ns_per_byte));
        let ratio = sim_calls_per_s / check.target_calls_per_s;
        if !ratio.is_finite() || (ratio - 1.0).abs() <= CHECK_TOLERANCE {
            return false;
        }
        let before = self.echo_payload_ns_per_byte;
        let price = (before * ratio).clamp(0.0, before + self.cpu_handler[2]);
        self.set_lock_price(price);
        price != before
    }

    /// Ends the lock's check: keeps the price of the round whose dn-sim ran nearest the target.
    pub fn settle_lock_check(&mut self) {
        let Some(check) = self.lock_check.as_mut() else {
            return;
        };
        let rates: Vec<f64> = check.rounds.iter().map(|r| r.0).collect();
        let Some(best) = nearest(&rates, check.target_calls_per_s) else {
            return;
        };
        check.kept = Some(best);
        let price = check.rounds[best].1;
        self.set_lock_price(price);
    }

    /// Whether the target's 0 B echo at one request in flight is known for the floor's check.
    pub fn floor_checkable(&self) -> bool {
        self.echo_base.mean_ms > 0.0 && self.echo_base.p99_ms > 0.0
    }

    /// Records a round of the floor's check: dn-sim ran the 0 B echo at one request in flight
    /// with `sim` latencies at the floor and jitter as they stand. Returns whether another
    /// round is worth running (dn-sim's mean off the target's by more than
    /// [`CHECK_TOLERANCE`] or its p99 by more than [`FLOOR_P99_TOLERANCE`], and the floor or
    /// the jitter moved); sets them for it.
    pub fn floor_check_round(&mut self, sim: Latencies) -> bool {
        let (floor, jitter) = (self.latency_floor_us, self.latency_jitter_us);
        let target = self.echo_base;
        let check = self.floor_check.get_or_insert_with(|| FloorCheck {
            target,
            ..FloorCheck::default()
        });
        check.rounds.push((floor, jitter, sim));
        let off = |s: f64, t: f64| (s / t - 1.0).abs();
        if !(sim.mean_ms.is_finite() && sim.p99_ms.is_finite()) {
            return false;
        }
        if off(sim.mean_ms, target.mean_ms) <= CHECK_TOLERANCE
            && off(sim.p99_ms, target.p99_ms) <= FLOOR_P99_TOLERANCE
        {
            return false;
        }
        // The share of a jitter's move that shows in dn-sim's spread: all of it unless two
        // rounds measured less (the floor counts from the arrival, so a jitter shorter than
        // dn-sim's own time in service shows not at all: 30 µs widened a p99 − p50 by 55 µs
        // where an exponential's is 117).
        let shown = check
            .rounds
            .len()
            .checked_sub(2)
            .map(|i| &check.rounds[i])
            .filter(|before| (jitter - before.1).abs() > 1e-3)
            .map_or(1.0, |before| {
                let widened_us = (sim.spread_ms() - before.2.spread_ms()) * 1e3;
                (widened_us / ((jitter - before.1) * EXP_P99_LESS_P50)).clamp(0.25, 1.0)
            });
        let next_jitter = (jitter
            + (target.spread_ms() - sim.spread_ms()) * 1e3 / (EXP_P99_LESS_P50 * shown))
            .max(0.0);
        let next_floor = (floor + (target.mean_ms - sim.mean_ms) * 1e3
            - shown * (next_jitter - jitter))
            .max(0.0);
        self.latency_floor_us = next_floor;
        self.latency_jitter_us = next_jitter;
        (next_floor, next_jitter) != (floor, jitter)
    }

    /// Ends the floor's check: keeps the floor and jitter of the round whose dn-sim ran
    /// nearest the target ([`FloorCheck`]'s error).
    pub fn settle_floor_check(&mut self) {
        let Some(check) = self.floor_check.as_mut() else {
            return;
        };
        let Some(best) = least_error(check.rounds.len(), |r| check.error(r)) else {
            return;
        };
        check.kept = Some(best);
        (self.latency_floor_us, self.latency_jitter_us) =
            (check.rounds[best].0, check.rounds[best].1);
    }

    /// Sets the lock's price, the handler's CPU outside it making up the difference.
    fn set_lock_price(&mut self, price: f64) {
        self.cpu_handler[2] += self.echo_payload_ns_per_byte - price;
        self.echo_payload_ns_per_byte = price;
    }

    /// The profile (`dn-sim-profile/1`, kind `measured`).
    pub fn to_toml(&self, release: &str, source: &str, measured_at: &str) -> String {
        let f = self.handler_byte_share;
        let mut checked = self
            .check
            .as_ref()
            .map_or(String::new(), |c| format!("# {}\n", c.summary()));
        if let Some(c) = &self.saturation_check {
            checked += &format!("# {}\n", c.summary());
        }
        if let Some(c) = &self.lock_check {
            checked += &format!("# {}\n", c.summary());
        }
        if let Some(c) = &self.floor_check {
            checked += &format!("# {}\n", c.summary());
        }
        let mut t = format!(
            "# A MEASURED dn-sim profile, written by `loadgen calibrate` (docs/loadgen.md).\n\
             # Fit: echo base latency {:.3} ms, WriteChunk base latency {:.3} ms at one request\n\
             # in flight; the handler pays {:.0} % of the per-byte costs.\n{checked}\n\
             format = \"dn-sim-profile/1\"\nkind = \"measured\"\n\n\
             [machine]\ncores = {}\nozone_release = \"{release}\"\n\n",
            self.echo_base.mean_ms,
            self.write_base_ms,
            f * 100.0,
            self.cores
        );
        let table = |name: &str, us: f64, ns: f64| {
            format!("[{name}]\nper_message_us = {us:.3}\nper_byte_ns = {ns:.5}\n\n")
        };
        t += &table(
            "event_loops.request",
            self.loop_us / 2.0,
            (1.0 - f) * self.req_ns_per_byte,
        );
        t += &table(
            "event_loops.response",
            self.loop_us / 2.0,
            (1.0 - f) * self.resp_ns_per_byte,
        );
        t += &table("handler.request", self.handler_us, f * self.req_ns_per_byte);
        t += &table("handler.response", 0.0, f * self.resp_ns_per_byte);
        t += &format!(
            "[handler.sleep]\nlate_us = {:.3}\nlate_per_ms_us = {:.3}\n",
            self.sleep_late_us, self.sleep_late_per_ms_us
        );
        if let Some(tail) = &self.sleep_tail {
            t += &format!(
                "tail_share = {:.5}\ntail_mean_per_ms_us = {:.3}\n",
                tail.share, tail.mean_per_ms_us
            );
        }
        t += "\n";
        let cpu = |name: &str, c: [f64; 3], write_chunk_us: f64| {
            format!(
                "[{name}]\nper_message_us = {:.3}\nper_request_byte_ns = {:.5}\nper_response_byte_ns = {:.5}\n{}\n",
                c[0],
                c[1],
                c[2],
                if write_chunk_us > 0.0 {
                    format!("per_write_chunk_us = {write_chunk_us:.3}\n")
                } else {
                    String::new()
                }
            )
        };
        t += &cpu("cpu.handler", self.cpu_handler, 0.0);
        t += &cpu(
            "cpu.background",
            self.cpu_background,
            self.cpu_write_chunk_us,
        );
        if let Some(cores) = self.cpu_capacity_cores {
            t += &format!("[cpu.capacity]\ncores = {cores:.3}\n\n");
        }
        if self.echo_payload_ns_per_byte > 0.0 {
            t += &format!(
                "[cpu.echo_payload]\nper_byte_ns = {:.5}\n\n",
                self.echo_payload_ns_per_byte
            );
        }
        t += &format!(
            "[latency]\nfloor_us = {:.3}\njitter_mean_us = {:.3}\n\n",
            self.latency_floor_us, self.latency_jitter_us
        );
        t += &format!(
            "[fit]\nsource = {}\nmeasured_at = {}\n",
            quote(source),
            quote(measured_at)
        );
        for (cell, unit, measured, predicted) in &self.residuals {
            t += &format!(
                "\n[[fit.residuals]]\ncell = {}\nunit = \"{unit}\"\nmeasured = {measured:.3}\npredicted = {predicted:.3}\n",
                quote(cell)
            );
        }
        t
    }

    /// A markdown table of the fit and its residuals.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "fitted: event loop {:.1} µs/message pair, handler {:.1} µs/command, \
             request {:.4} ns/B, response {:.4} ns/B (handler share {:.2}), {} cores; \
             CPU on the handler {:.1} µs/message, {:.3} ns/request B, {:.3} ns/response B, \
             {:.3} ns/echo payload B under one lock; \
             CPU in the background {:.1} µs/message, {:.3} ns/request B, {:.3} ns/response B, \
             {:.1} µs/WriteChunk, \
             at most {} cores together; \
             latency floor {:.1} µs + a jitter of {:.1} µs on average; an echo's sleep wakes {:.1} µs + {:.1} µs a ms slept late{}\n\n\
             | cell | unit | measured | model | model ÷ measured |\n|---|---|---:|---:|---:|\n",
            self.loop_us,
            self.handler_us,
            self.req_ns_per_byte,
            self.resp_ns_per_byte,
            self.handler_byte_share,
            self.cores,
            self.cpu_handler[0],
            self.cpu_handler[1],
            self.cpu_handler[2],
            self.echo_payload_ns_per_byte,
            self.cpu_background[0],
            self.cpu_background[1],
            self.cpu_background[2],
            self.cpu_write_chunk_us,
            self.cpu_capacity_cores
                .map_or("all".to_string(), |c| format!("{c:.2}")),
            self.latency_floor_us,
            self.latency_jitter_us,
            self.sleep_late_us,
            self.sleep_late_per_ms_us,
            self.sleep_tail.map_or(String::new(), |t| format!(
                ", {:.2} % of sleeps later still by {:.0} µs a ms slept on average",
                t.share * 100.0,
                t.mean_per_ms_us
            )),
        );
        for (cell, unit, m, p) in &self.residuals {
            s += &format!(
                "| {cell} | {unit} | {m:.1} | {p:.1} | {:.2} |\n",
                p / m.max(1e-9)
            );
        }
        if let Some(check) = &self.saturation_check {
            s += &format!("\n{}\n", check.summary());
        }
        if let Some(check) = &self.check {
            s += &format!("\n{}\n", check.summary());
        }
        if let Some(check) = &self.lock_check {
            s += &format!("\n{}\n", check.summary());
        }
        if let Some(check) = &self.floor_check {
            s += &format!("\n{}\n", check.summary());
        }
        s
    }
}

fn quote(s: &str) -> String {
    let escaped: String = s
        .chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c if c.is_control() => vec![' '],
            c => vec![c],
        })
        .collect();
    format!("\"{escaped}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(pool: u32, c: u32, t: u32, resp: u64, calls: f64, mean_ms: f64) -> Cell {
        Cell {
            kind: Kind::Echo,
            pool,
            clients: c,
            threads: t,
            req_bytes: 0,
            resp_bytes: resp,
            sleep_ms: 0,
            calls_per_s: calls,
            mb_per_s: 0.0,
            mean_ms,
            p50_ms: mean_ms,
            p99_ms: mean_ms,
            baseline: false,
            machine_cpu_ms_per_call: None,
        }
    }

    /// `c` with the machine's CPU per call measured (ms), on the baseline or the target.
    fn with_cpu(mut c: Cell, ms: f64, baseline: bool) -> Cell {
        c.machine_cpu_ms_per_call = Some(ms);
        c.baseline = baseline;
        c
    }

    #[test]
    fn loops_follow_xceiver_server_grpc() {
        assert_eq!(
            [1, 9, 10, 19, 20, 35].map(|p| loops(p, 2)),
            [4, 4, 1, 1, 2, 3]
        );
    }

    #[test]
    fn cells_measured_on_several_starts_merge_into_their_geometric_mean() {
        let cell = |calls: f64, mean: f64, baseline: bool| Cell {
            kind: Kind::Echo,
            pool: 10,
            clients: 32,
            threads: 32,
            req_bytes: 0,
            resp_bytes: 0,
            sleep_ms: 0,
            calls_per_s: calls,
            mb_per_s: 0.0,
            mean_ms: mean,
            p50_ms: mean,
            p99_ms: 2.0 * mean,
            baseline,
            machine_cpu_ms_per_call: Some(calls / 1e3),
        };
        let other = Cell {
            resp_bytes: 1 << 20,
            ..cell(100.0, 80.0, false)
        };
        let (merged, away) = merge_repeats(vec![
            cell(20_000.0, 1.6, false),
            other.clone(),
            cell(40_000.0, 0.8, true),
            cell(45_000.0, 0.4, false),
        ]);
        assert_eq!(away, 1, "two starts of one cell; the baseline's is its own");
        assert_eq!(merged.len(), 3);
        // Each number of the two starts' cell: their geometric mean, first in place.
        assert!(
            (merged[0].calls_per_s - 30_000.0).abs() < 1e-6,
            "{}",
            merged[0].calls_per_s
        );
        assert!((merged[0].mean_ms - 0.8).abs() < 1e-9);
        assert!((merged[0].p99_ms - 1.6).abs() < 1e-9);
        assert!((merged[0].machine_cpu_ms_per_call.unwrap() - 30.0).abs() < 1e-9);
        assert!(!merged[0].baseline);
        assert_eq!(merged[1], other);
        assert!(merged[2].baseline && merged[2].calls_per_s == 40_000.0);
    }

    #[test]
    fn synthetic_cells_of_a_known_model_give_back_its_costs() {
        // L = 400 µs, H = 600 µs, 2 cores; 1 MiB responses cost 2 ns/B, all on the handler.
        let (l, h, cores) = (400.0, 600.0, 2);
        let r0 = 1.2;
        let mut cells = vec![echo(10, 1, 1, 0, 1e3 / r0, r0)];
        for (pool, c, t) in [(2, 32, 32), (10, 32, 32), (10, 4, 4), (4, 8, 8)] {
            let x = predict(&echo(pool, c, t, 0, 1.0, 1.0), cores, r0, l, h, None);
            cells.push(echo(pool, c, t, 0, x, 1.0));
        }
        let byte_us = 2.0 * 1048576.0 / 1e3;
        let r1 = r0 + byte_us / 1e3;
        cells.push(echo(10, 1, 1, 1 << 20, 1e3 / r1, r1));
        for pool in [2, 10] {
            let x = predict(
                &echo(pool, 8, 4, 1 << 20, 1.0, 1.0),
                cores,
                r1,
                l,
                h + byte_us,
                None,
            );
            cells.push(echo(pool, 8, 4, 1 << 20, x, 1.0));
        }
        let f = fit(&cells, cores).unwrap();
        assert!((f.loop_us / l - 1.0).abs() < 0.03, "{f:?}");
        assert!((f.handler_us / h - 1.0).abs() < 0.03, "{f:?}");
        assert!((f.resp_ns_per_byte - 2.0).abs() < 1e-6, "{f:?}");
        assert!(f.handler_byte_share > 0.9, "{f:?}");
        for (cell, _, m, p) in &f.residuals {
            assert!((p / m - 1.0).abs() < 0.05, "{cell}: {m} vs {p}");
        }
        let toml = f.to_toml("2.2.0", "a \"test\"", "now");
        assert!(toml.contains("kind = \"measured\""), "{toml}");
        assert!(toml.contains("source = \"a \\\"test\\\"\""), "{toml}");
    }

    /// A fit whose target answers a 0 B echo at one request in flight in 0.220 ms on average
    /// (p50 0.207, p99 0.431) and the baseline in 0.130 (p50 0.120, p99 0.220).
    fn fitted_with_a_spread_floor() -> Fitted {
        let spread = |mut c: Cell, p50: f64, p99: f64| {
            c.p50_ms = p50;
            c.p99_ms = p99;
            c
        };
        let cells = vec![
            spread(echo(10, 1, 1, 0, 1e3 / 0.22, 0.22), 0.207, 0.431),
            spread(
                with_cpu(echo(0, 1, 1, 0, 1e3 / 0.13, 0.13), 0.1, true),
                0.12,
                0.22,
            ),
        ];
        fit(&cells, 2).unwrap()
    }

    #[test]
    fn the_floors_jitter_is_the_targets_spread_beyond_the_baselines_and_keeps_the_mean() {
        let f = fitted_with_a_spread_floor();
        // p99 - p50: 0.224 ms on the target, 0.100 on the baseline; an exponential's is
        // ln 50 x its mean.
        let jitter = (224.0 - 100.0) / 50f64.ln();
        assert!((f.latency_jitter_us - jitter).abs() < 1e-6, "{f:?}");
        // The floor and the jitter's mean together: the 90 µs the target's mean is beyond.
        assert!(
            (f.latency_floor_us + f.latency_jitter_us - 90.0).abs() < 1e-6,
            "{f:?}"
        );
        let toml = f.to_toml("2.2.0", "t", "now");
        assert!(
            toml.contains(&format!(
                "[latency]\nfloor_us = {:.3}\njitter_mean_us = {:.3}\n",
                f.latency_floor_us, f.latency_jitter_us
            )),
            "{toml}"
        );
        // A spread wider than the mean leaves room for is capped there: no floor, all jitter.
        let mut cells = vec![
            echo(10, 1, 1, 0, 1e3 / 0.14, 0.14),
            with_cpu(echo(0, 1, 1, 0, 1e3 / 0.13, 0.13), 0.1, true),
        ];
        cells[0].p99_ms = 1.0;
        let f = fit(&cells, 2).unwrap();
        assert!((f.latency_jitter_us - 10.0).abs() < 1e-6, "{f:?}");
        assert!(f.latency_floor_us.abs() < 1e-6, "{f:?}");
    }

    #[test]
    fn the_floor_check_moves_the_jitter_by_the_missing_spread_and_the_floor_by_the_mean() {
        let mut f = fitted_with_a_spread_floor();
        assert!(f.floor_checkable());
        let (floor, jitter) = (f.latency_floor_us, f.latency_jitter_us);
        // dn-sim: 21 µs faster on average, 128 µs too little between p50 and p99.
        let sim = Latencies {
            mean_ms: 0.199,
            p50_ms: 0.193,
            p99_ms: 0.289,
        };
        assert!(f.floor_check_round(sim));
        let more_jitter = 128.0 / 50f64.ln();
        assert!(
            (f.latency_jitter_us - (jitter + more_jitter)).abs() < 1e-6,
            "{f:?}"
        );
        assert!(
            (f.latency_floor_us - (floor + 21.0 - more_jitter)).abs() < 1e-6,
            "{f:?}"
        );
        // Within 2 % of the mean and 10 % of the p99: no further round.
        let close = Latencies {
            mean_ms: 0.223,
            p50_ms: 0.205,
            p99_ms: 0.41,
        };
        let (floor2, jitter2) = (f.latency_floor_us, f.latency_jitter_us);
        assert!(!f.floor_check_round(close));
        // A third round overshoots; the settled profile is the nearest round's.
        let far = Latencies {
            mean_ms: 0.30,
            p50_ms: 0.25,
            p99_ms: 0.90,
        };
        f.floor_check_round(far);
        f.settle_floor_check();
        let check = f.floor_check.as_ref().unwrap();
        assert_eq!(check.kept, Some(1), "{check:?}");
        assert_eq!((f.latency_floor_us, f.latency_jitter_us), (floor2, jitter2));
        assert!(
            f.to_toml("2.2.0", "t", "now")
                .contains("# Latency floor checked on dn-sim"),
            "the check is in the profile's header"
        );
        assert!(f.markdown().contains("round 2's kept"), "{}", f.markdown());

        // A jitter's move that showed half in dn-sim's spread is taken as half as effective.
        let mut f = fitted_with_a_spread_floor();
        assert!(f.floor_check_round(sim));
        let (floor1, jitter1) = (f.latency_floor_us, f.latency_jitter_us);
        let moved = jitter1 - jitter;
        let half = Latencies {
            mean_ms: 0.199 + moved / 2.0 / 1e3,
            p50_ms: 0.193,
            p99_ms: 0.289 + moved * 50f64.ln() / 2.0 / 1e3,
        };
        assert!(f.floor_check_round(half));
        let missing_us = 224.0 - (half.p99_ms - half.p50_ms) * 1e3;
        let next = jitter1 + missing_us / (50f64.ln() * 0.5);
        assert!((f.latency_jitter_us - next).abs() < 1e-6, "{f:?}");
        let mean_us = (0.22 - half.mean_ms) * 1e3;
        assert!(
            (f.latency_floor_us - (floor1 + mean_us - 0.5 * (next - jitter1))).abs() < 1e-6,
            "{f:?}"
        );
    }

    /// A fit of 0 B echoes at two pools whose loops (400 µs) and handler (600 µs) limit them.
    fn fitted_with_message_costs() -> Fitted {
        let (l, h, cores, r0) = (400.0, 600.0, 2, 1.2);
        let mut cells = vec![echo(10, 1, 1, 0, 1e3 / r0, r0)];
        for (pool, c, t) in [(2, 32, 32), (10, 32, 32)] {
            let x = predict(&echo(pool, c, t, 0, 1.0, 1.0), cores, r0, l, h, None);
            cells.push(echo(pool, c, t, 0, x, 1.0));
        }
        fit(&cells, cores).unwrap()
    }

    #[test]
    fn the_saturation_check_scales_each_stage_by_dn_sims_rate_on_the_cells_it_limits() {
        let mut f = fitted_with_message_costs();
        assert!(f.saturation_checkable(), "{f:?}");
        assert_eq!(
            f.saturation_cells
                .iter()
                .map(|c| c.pool)
                .collect::<Vec<_>>(),
            [2, 10]
        );
        let (l0, h0) = (f.loop_us, f.handler_us);
        assert!(l0 > 0.0 && h0 > 0.0, "{f:?}");
        let target: Vec<f64> = f.saturation_cells.iter().map(|c| c.calls_per_s).collect();
        let at = |share: [f64; 2]| -> Vec<f64> {
            target.iter().zip(share).map(|(t, s)| t * s).collect()
        };
        let scaled = |f: &Fitted, l: f64, h: f64| {
            (f.loop_us / l0 - l).abs() < 1e-9 && (f.handler_us / h0 - h).abs() < 1e-9
        };
        // Pool 2's two handlers limit it, pool 10's one event loop limits it: dn-sim at 50 % of
        // the target at pool 2 scales the handler by 0.5, at 72 % at pool 10 the loop by 0.72.
        assert_eq!(f.saturation_check, None);
        assert!(f.saturation_check_round(at([0.5, 0.72])));
        assert_eq!(
            f.saturation_check.as_ref().unwrap().limits,
            [Limit::Handler, Limit::Loop]
        );
        assert!(scaled(&f, 0.72, 0.5), "{f:?}");
        // Pool 10 within 5 %: the loop stays; pool 2 still 20 % slow: the handler 0.5 x 0.8.
        assert!(f.saturation_check_round(at([0.8, 1.03])));
        assert!(scaled(&f, 0.72, 0.4), "{f:?}");
        // Both within 5 %: the check ends, and keeps the nearest round's costs.
        assert!(!f.saturation_check_round(at([0.97, 1.01])));
        f.settle_saturation_check();
        assert!(scaled(&f, 0.72, 0.4), "{f:?}");
        let check = f.saturation_check.as_ref().unwrap();
        assert_eq!(check.kept, Some(2));
        assert_eq!(check.rounds.len(), 3);
        let toml = f.to_toml("2.2.0", "t", "now");
        assert!(
            toml.contains("# Loops, handler and CPU checked on dn-sim"),
            "{toml}"
        );
        assert!(toml.contains("round 3's costs kept"), "{toml}");
        assert!(
            toml.contains(&format!(
                "[handler.request]\nper_message_us = {:.3}\n",
                0.4 * h0
            )),
            "{toml}"
        );
    }

    #[test]
    fn the_saturation_check_drops_a_stage_whose_cut_did_not_help() {
        let mut f = fitted_with_message_costs();
        let (l0, h0) = (f.loop_us, f.handler_us);
        let target: Vec<f64> = f.saturation_cells.iter().map(|c| c.calls_per_s).collect();
        let at = |share: [f64; 2]| -> Vec<f64> {
            target.iter().zip(share).map(|(t, s)| t * s).collect()
        };
        // The handler cut to half at pool 2 brought dn-sim from 50 % to 55 % of the target:
        // not its cost, so none; the loop, at pool 10, within 5 % all along, stays.
        assert!(f.saturation_check_round(at([0.5, 1.0])));
        assert_eq!((f.loop_us, f.handler_us), (l0, 0.5 * h0));
        assert!(f.saturation_check_round(at([0.55, 1.0])));
        assert_eq!((f.loop_us, f.handler_us), (l0, 0.0));
        assert!(!f.saturation_check_round(at([0.97, 1.0])));
        f.settle_saturation_check();
        assert_eq!(f.saturation_check.as_ref().unwrap().kept, Some(2));
        assert_eq!((f.loop_us, f.handler_us), (l0, 0.0));
    }

    #[test]
    fn the_saturation_check_drops_costs_that_fall_below_the_grid_and_keeps_the_best_round() {
        let mut f = fitted_with_message_costs();
        let target: Vec<f64> = f.saturation_cells.iter().map(|c| c.calls_per_s).collect();
        let at = |k: f64| -> Vec<f64> { target.iter().map(|t| t * k).collect() };
        // Far too slow: the scaled costs fall under 0.5 µs and become none.
        assert!(f.saturation_check_round(at(1e-6)));
        assert_eq!((f.loop_us, f.handler_us), (0.0, 0.0));
        // Without them dn-sim is 20 % fast, but there is nothing left to scale; that round is
        // the nearer one, and kept.
        assert!(!f.saturation_check_round(at(1.2)));
        f.settle_saturation_check();
        assert_eq!(f.saturation_check.as_ref().unwrap().kept, Some(1));
        assert_eq!((f.loop_us, f.handler_us), (0.0, 0.0));
        assert!(!f.saturation_checkable());
    }

    #[test]
    fn the_saturation_check_keeps_the_fitted_costs_when_their_round_was_nearest() {
        let mut f = fitted_with_message_costs();
        let (l0, h0) = (f.loop_us, f.handler_us);
        let target: Vec<f64> = f.saturation_cells.iter().map(|c| c.calls_per_s).collect();
        let at = |k: f64| -> Vec<f64> { target.iter().map(|t| t * k).collect() };
        assert!(f.saturation_check_round(at(0.9)));
        // The scaled costs overshoot on a noisy machine: back to the round that was nearer.
        assert!(f.saturation_check_round(at(1.3)));
        f.settle_saturation_check();
        assert_eq!(f.saturation_check.as_ref().unwrap().kept, Some(0));
        assert_eq!((f.loop_us, f.handler_us), (l0, h0));
    }

    /// A fit whose CPU stage (50 µs a message in the background, at 2 busy cores) alone
    /// limits the target's loaded 0 B echoes at pools 2 and 10: 20,000 calls/s each, where the
    /// baseline served 40,000.
    fn fitted_with_cpu_limits() -> Fitted {
        let cells = vec![
            echo(10, 1, 1, 0, 1e3 / 0.13, 0.13),
            with_cpu(echo(0, 1, 1, 0, 1e3 / 0.1, 0.1), 0.1, true),
            with_cpu(echo(2, 32, 32, 0, 20_000.0, 1.6), 0.1, false),
            with_cpu(echo(10, 32, 32, 0, 20_000.0, 1.6), 0.1, false),
            with_cpu(echo(0, 32, 32, 0, 40_000.0, 0.8), 0.05, true),
        ];
        fit(&cells, 2).unwrap()
    }

    #[test]
    fn the_saturation_check_corrects_the_cpu_stage_where_it_limits_the_cells() {
        let mut f = fitted_with_cpu_limits();
        assert_eq!((f.loop_us, f.handler_us), (0.0, 0.0), "{f:?}");
        assert_eq!(f.cpu_handler[0], 0.0, "{f:?}");
        assert!((f.cpu_background[0] - 50.0).abs() < 1e-6, "{f:?}");
        // Nothing on the loops and the handler, but the CPU limits both cells: checkable.
        assert!(f.saturation_checkable(), "{f:?}");
        // dn-sim at 16,000 calls/s where the target made 20,000: 2 cores x (1 / 20,000 -
        // 1 / 16,000) s = -25 µs a message.
        assert!(f.saturation_check_round(vec![16_000.0, 16_000.0]));
        assert_eq!(
            f.saturation_check.as_ref().unwrap().limits,
            [Limit::Cpu, Limit::Cpu]
        );
        assert_eq!((f.loop_us, f.handler_us), (0.0, 0.0), "{f:?}");
        assert_eq!(f.cpu_handler[0], 0.0, "{f:?}");
        assert!((f.cpu_background[0] - 25.0).abs() < 1e-6, "{f:?}");
        // Now 25 % fast: +2 x (1 / 20,000 - 1 / 25,000) s = +20 µs.
        assert!(f.saturation_check_round(vec![25_000.0, 25_000.0]));
        assert!((f.cpu_message_us() - 45.0).abs() < 1e-6, "{f:?}");
        // Within 5 %: the check ends and keeps this round's costs, the nearest.
        assert!(!f.saturation_check_round(vec![20_500.0, 19_800.0]));
        f.settle_saturation_check();
        assert_eq!(f.saturation_check.as_ref().unwrap().kept, Some(2));
        assert!((f.cpu_background[0] - 45.0).abs() < 1e-6, "{f:?}");
        let toml = f.to_toml("2.2.0", "t", "now");
        assert!(
            toml.contains("[cpu.handler]\nper_message_us = 0.000"),
            "{toml}"
        );
        assert!(
            toml.contains("[cpu.background]\nper_message_us = 45.000"),
            "{toml}"
        );
        assert!(
            toml.contains("# Loops, handler and CPU checked on dn-sim"),
            "{toml}"
        );
        assert!(
            toml.contains("16000/16000 at 0.0 + 0.0 + 50.0 µs, 25000/25000 at 0.0 + 0.0 + 25.0 µs"),
            "{toml}"
        );
    }

    #[test]
    fn the_saturation_check_takes_the_cpu_stage_down_to_none_and_no_further() {
        let mut f = fitted_with_cpu_limits();
        // dn-sim at a quarter of the target: -2 x (1 / 5,000 - 1 / 20,000) s = -300 µs, more
        // than there is.
        assert!(f.saturation_check_round(vec![5_000.0, 5_000.0]));
        assert_eq!((f.cpu_handler[0], f.cpu_background[0]), (0.0, 0.0));
        // Still slow without it: nothing left to take, the check ends on the nearer round.
        assert!(!f.saturation_check_round(vec![15_000.0, 15_000.0]));
        f.settle_saturation_check();
        assert_eq!(f.saturation_check.as_ref().unwrap().kept, Some(1));
        assert_eq!(f.cpu_message_us(), 0.0);
        // The loops and the handler follow no cell of the CPU's: they stay at none.
        assert_eq!((f.loop_us, f.handler_us), (0.0, 0.0), "{f:?}");
    }

    #[test]
    fn loaded_writes_of_two_sizes_give_a_write_chunks_cost_beyond_its_bytes() {
        let write = |pool: u32, bytes: u64, calls: f64, cpu_ms: f64, baseline: bool| {
            let mut w = echo(pool, 8, 8, 0, calls, 20.0);
            w.kind = Kind::Write;
            w.req_bytes = bytes;
            with_cpu(w, cpu_ms, baseline)
        };
        // Every loaded cell keeps both cores busy. A message costs 50 µs (the 0 B echoes), a
        // WriteChunk 150 µs more and 2796.875 µs a MiB: 3000 µs for 1 MiB with its sixteenth
        // of a PutBlock, 375 µs for 64 KiB with its 256th.
        let cells = vec![
            echo(10, 1, 1, 0, 1e3 / 0.13, 0.13),
            with_cpu(echo(0, 1, 1, 0, 1e3 / 0.1, 0.1), 0.1, true),
            with_cpu(echo(10, 32, 32, 0, 20_000.0, 1.6), 0.1, false),
            with_cpu(echo(0, 32, 32, 0, 40_000.0, 0.8), 0.05, true),
            write(10, 1 << 20, 400.0, 5.0, false),
            write(0, 1 << 20, 1_000.0, 2.0, true),
            write(10, 64 << 10, 1.0 / 2.875e-4, 2.0 * 2.875e-1, false),
            write(0, 64 << 10, 10_000.0, 0.2, true),
        ];
        let f = fit(&cells, 2).unwrap();
        assert!((f.cpu_write_chunk_us - 150.0).abs() < 1e-6, "{f:?}");
        let per_byte = f.cpu_handler[1] + f.cpu_background[1];
        assert!((per_byte - 2796.875e3 / 1048576.0).abs() < 1e-6, "{f:?}");
        let toml = f.to_toml("2.2.0", "t", "now");
        let background = toml
            .split("[cpu.background]")
            .nth(1)
            .and_then(|t| t.split("\n\n").next())
            .unwrap_or_default();
        assert!(
            background.contains("per_write_chunk_us = 150.000"),
            "{toml}"
        );
        // A small chunk cheaper than the line through none would say: no WriteChunk cost, and
        // the bytes priced by the line through the origin.
        let mut cheap = cells.clone();
        cheap[6] = write(10, 64 << 10, 1.0 / 1.2e-4, 2.0 * 1.2e-1, false);
        let g = fit(&cheap, 2).unwrap();
        assert_eq!(g.cpu_write_chunk_us, 0.0, "{g:?}");
        let points = [
            (1048576.0, 3000.0 - 50.0 * (1.0 + 1.0 / 16.0)),
            (
                65536.0,
                2.0 * (1.2e-4 - 1e-4) * 1e6 - 50.0 * (1.0 + 1.0 / 256.0),
            ),
        ];
        let slope = points.iter().map(|p| p.0 * p.1).sum::<f64>()
            / points.iter().map(|p| p.0 * p.0).sum::<f64>();
        assert!(
            (g.cpu_handler[1] + g.cpu_background[1] - slope * 1e3).abs() < 1e-6,
            "{g:?}"
        );
        // Both loaded writes are predicted by the CPU bound with it.
        for label in [
            "write chunk=64KiB pool=10 8x8",
            "write chunk=1MiB pool=10 8x8",
        ] {
            let (_, _, m, p) = f
                .residuals
                .iter()
                .find(|r| r.0 == label)
                .unwrap_or_else(|| panic!("no {label} in {:?}", f.residuals));
            assert!((p / m - 1.0).abs() < 0.01, "{label}: {m} vs {p}");
        }
    }

    #[test]
    fn the_cpu_stage_is_what_serves_the_targets_rate_on_the_baselines_machine() {
        let mut write = echo(10, 8, 8, 0, 400.0, 20.0);
        write.kind = Kind::Write;
        write.req_bytes = 1 << 20;
        // Every loaded cell keeps both cores busy (ms per call x calls/s = 2 s a second).
        let mut cells = vec![
            // At one request in flight the target is 30 µs slower than the baseline: the
            // latency floor's, none of the 50 µs a message on the handler.
            echo(10, 1, 1, 0, 1e3 / 0.13, 0.13),
            with_cpu(echo(0, 1, 1, 0, 1e3 / 0.1, 0.1), 0.1, true),
            with_cpu(echo(10, 32, 32, 0, 20_000.0, 1.6), 0.1, false),
            with_cpu(echo(0, 32, 32, 0, 40_000.0, 0.8), 0.05, true),
            with_cpu(echo(10, 8, 8, 1 << 20, 1e3 / 5.25, 44.0), 10.5, false),
            with_cpu(echo(0, 8, 8, 1 << 20, 2_000.0, 4.2), 1.0, true),
            // Not saturated (a quarter of the baseline's load): some other limit, no CPU.
            with_cpu(echo(10, 16, 16, 1 << 20, 50.0, 320.0), 2.0, false),
            with_cpu(echo(0, 16, 16, 1 << 20, 2_000.0, 8.0), 1.0, true),
            with_cpu(write.clone(), 5.0, false),
        ];
        write.pool = 0;
        write.calls_per_s = 1_000.0;
        cells.push(with_cpu(write, 2.0, true));
        let f = fit(&cells, 2).unwrap();
        // The handler spends nothing a response byte here (the background all of it): no part
        // of it to make payloads under a lock.
        let mib = 1048576.0;
        assert_eq!(f.echo_payload_ns_per_byte, 0.0, "{f:?}");
        let total: Vec<f64> = (0..3)
            .map(|i| f.cpu_handler[i] + f.cpu_background[i])
            .collect();
        // 2 cores x (1 / 20,000 - 1 / 40,000) s = 50 µs.
        assert!((total[0] - 50.0).abs() < 1e-6, "{f:?}");
        assert_eq!(f.cpu_handler[0], 0.0, "{f:?}");
        assert!(
            (total[2] - (9_500.0 - 50.0) * 1e3 / mib).abs() < 1e-6,
            "{f:?}"
        );
        // A WriteChunk and a sixteenth of a PutBlock (one every 16 MB).
        assert!(
            (total[1] - (3_000.0 - 50.0 * (1.0 + 1.0 / 16.0)) * 1e3 / mib).abs() < 1e-6,
            "{f:?}"
        );
        // One size of loaded writes: all per byte.
        assert_eq!(f.cpu_write_chunk_us, 0.0, "{f:?}");
        // The loaded 0 B cell is predicted by the CPU bound, and no loop or handler is needed.
        let (_, _, m, p) = f
            .residuals
            .iter()
            .find(|r| r.0 == "echo resp=0B pool=10 32x32")
            .unwrap();
        assert!((p / m - 1.0).abs() < 0.01, "{m} vs {p}");
        assert_eq!((f.loop_us, f.handler_us), (0.0, 0.0), "{f:?}");
        assert!((f.latency_floor_us - 30.0).abs() < 1e-6, "{f:?}");
        let toml = f.to_toml("2.2.0", "t", "now");
        assert!(
            toml.contains("[cpu.handler]\nper_message_us = 0.000"),
            "{toml}"
        );
        assert!(
            toml.contains("[cpu.background]\nper_message_us = 50.000"),
            "{toml}"
        );
        // Priced where the baseline kept both cores busy: the burns may take both.
        assert!(toml.contains("[cpu.capacity]\ncores = 2.000\n"), "{toml}");
        assert!(!toml.contains("[cpu.echo_payload]"), "{toml}");
        // Without the machine's CPU (a remote target) there is no CPU stage.
        for c in &mut cells {
            c.machine_cpu_ms_per_call = None;
        }
        let f = fit(&cells, 2).unwrap();
        assert_eq!((f.cpu_handler, f.cpu_background), ([0.0; 3], [0.0; 3]));
        assert_eq!(f.cpu_capacity_cores, None);
        assert_eq!(
            f.echo_payload_ns_per_byte, 0.0,
            "no CPU stage, no lock in it"
        );
        assert!(
            !f.to_toml("2.2.0", "t", "now")
                .contains("[cpu.echo_payload]")
        );
    }

    #[test]
    fn a_pool_with_one_event_loop_is_priced_by_its_loop_not_by_cpu() {
        // The baseline serves 40,000 calls/s at both pools with both cores busy. The target
        // matches it at pool 2 (4 loops), and serves 15 % fewer at pool 10 (one loop), where its
        // CPU per call is higher only because the same busy machine served fewer calls.
        let cells = vec![
            echo(10, 1, 1, 0, 1e3 / 0.12, 0.12),
            with_cpu(echo(0, 1, 1, 0, 1e3 / 0.1, 0.1), 0.1, true),
            with_cpu(echo(2, 32, 32, 0, 40_000.0, 0.8), 0.05, false),
            with_cpu(
                echo(10, 32, 32, 0, 34_000.0, 0.94),
                2.0 / 34_000.0 * 1e3,
                false,
            ),
            with_cpu(echo(0, 32, 32, 0, 40_000.0, 0.8), 0.05, true),
        ];
        let f = fit(&cells, 2).unwrap();
        // No CPU beyond the baseline's a message: the pool with 4 loops prices it.
        assert!(f.cpu_handler[0] + f.cpu_background[0] < 1e-9, "{f:?}");
        // The one loop explains pool 10: about 1 / 34,000 s a message.
        assert!((f.loop_us / (1e6 / 34_000.0) - 1.0).abs() < 0.06, "{f:?}");
        for (cell, _, m, p) in f.residuals.iter().filter(|r| r.0.contains("32x32")) {
            assert!((p / m - 1.0).abs() < 0.06, "{cell}: {m} vs {p}");
        }
    }

    #[test]
    fn the_check_moves_the_handlers_excess_per_response_byte_to_the_background() {
        let cells = vec![
            echo(10, 1, 1, 0, 1e3 / 0.13, 0.13),
            with_cpu(echo(0, 1, 1, 0, 1e3 / 0.1, 0.1), 0.1, true),
            // 1 MiB at one request in flight: 10 ms on the target, 1 ms on the baseline.
            echo(10, 1, 1, 1 << 20, 100.0, 10.0),
            with_cpu(echo(0, 1, 1, 1 << 20, 1e3, 1.0), 1.0, true),
            with_cpu(echo(10, 32, 32, 0, 20_000.0, 1.6), 0.1, false),
            with_cpu(echo(0, 32, 32, 0, 40_000.0, 0.8), 0.05, true),
            with_cpu(echo(10, 8, 8, 1 << 20, 1e3 / 5.25, 44.0), 10.5, false),
            with_cpu(echo(0, 8, 8, 1 << 20, 2_000.0, 4.2), 1.0, true),
        ];
        let fitted = fit(&cells, 2).unwrap();
        assert!(fitted.checkable(), "{fitted:?}");
        assert_eq!(fitted.echo_mib_ms, Some(10.0));
        // The loaded 1 MiB echo ran 1e3 / 5.25 calls/s: its payloads' lock is priced to let that
        // many through, taken out of the handler's 8.97 ms a MiB (the target's 9.87 ms beyond
        // its 0 B echo, less the baseline's 0.9), and the model's loaded echo keeps to it.
        let lock_ns = 5.25e6 / 1048576.0;
        assert!(
            (fitted.echo_payload_ns_per_byte - lock_ns).abs() < 1e-9,
            "{fitted:?}"
        );
        assert!(
            (fitted.cpu_handler[2] + lock_ns - 8.97e6 / 1048576.0).abs() < 1e-6,
            "{fitted:?}"
        );
        let (_, _, m, p) = fitted
            .residuals
            .iter()
            .find(|r| r.0 == "echo resp=1MiB pool=10 8x8")
            .unwrap();
        assert!(p / m <= 1.0 + 1e-9, "{m} vs {p}");
        let toml = fitted.to_toml("2.2.0", "t", "now");
        assert!(
            toml.contains(&format!("[cpu.echo_payload]\nper_byte_ns = {lock_ns:.5}\n")),
            "{toml}"
        );
        // The lock's check: dn-sim made 80 % of the target's rate, so the price falls by a
        // fifth, the difference back on the handler outside the lock; a round within 2 % ends
        // it, and the nearest round's price is kept.
        let target = 1e3 / 5.25;
        let mut l = fitted.clone();
        assert!(l.lock_check_round(0.8 * target));
        assert!(
            (l.echo_payload_ns_per_byte - 0.8 * lock_ns).abs() < 1e-9,
            "{l:?}"
        );
        let outside = fitted.cpu_handler[2] + 0.2 * lock_ns;
        assert!((l.cpu_handler[2] - outside).abs() < 1e-9, "{l:?}");
        assert!(l.lock_check_round(1.1 * target));
        assert!(!l.lock_check_round(0.99 * target));
        l.settle_lock_check();
        let check = l.lock_check.as_ref().unwrap();
        assert_eq!(check.kept, Some(2));
        assert_eq!(check.rounds.len(), 3);
        assert!((l.echo_payload_ns_per_byte - check.rounds[2].1).abs() < 1e-12);
        assert!(
            (l.echo_payload_ns_per_byte + l.cpu_handler[2]
                - fitted.echo_payload_ns_per_byte
                - fitted.cpu_handler[2])
                .abs()
                < 1e-9
        );
        assert!(
            l.to_toml("2.2.0", "t", "now")
                .contains("# Echo payload lock checked on dn-sim")
        );
        // Settling on the first round restores the fitted price.
        let mut l = fitted.clone();
        l.lock_check_round(0.5 * target);
        l.lock_check_round(3.0 * target);
        l.settle_lock_check();
        assert_eq!(l.echo_payload_ns_per_byte, fitted.echo_payload_ns_per_byte);
        assert_eq!(l.cpu_handler, fitted.cpu_handler);
        let total = fitted.cpu_handler[2] + fitted.cpu_background[2];
        let ns_per_ms = 1e6 / 1048576.0;
        // Within the tolerance: nothing moves, and no other round is needed.
        let mut f = fitted.clone();
        assert!(!f.check_round(10.1));
        assert_eq!(f.cpu_handler, fitted.cpu_handler);
        assert_eq!(f.check.as_ref().unwrap().rounds_ms, vec![10.1]);
        // dn-sim 2 ms slower: 2 ms a MiB off the handler, onto the background.
        assert!(fitted.cpu_handler[2] > 2.0 * ns_per_ms, "{fitted:?}");
        assert!(f.check_round(12.0));
        let moved = fitted.cpu_handler[2] - f.cpu_handler[2];
        assert!((moved - 2.0 * ns_per_ms).abs() < 1e-9, "{f:?}");
        assert!((f.cpu_handler[2] + f.cpu_background[2] - total).abs() < 1e-9);
        // Faster than the target: back to the handler, at most what the background has.
        assert!(f.check_round(1.0));
        assert!(f.cpu_background[2].abs() < 1e-9, "{f:?}");
        assert!((f.cpu_handler[2] - total).abs() < 1e-9, "{f:?}");
        let check = f.check.as_ref().unwrap();
        assert_eq!(check.rounds_ms, vec![10.1, 12.0, 1.0]);
        assert!((check.moved_ns_per_byte + fitted.cpu_background[2]).abs() < 1e-9);
        // Nothing left to move: no further round.
        assert!(!f.check_round(1.0));
        assert_eq!(f.check.as_ref().unwrap().rounds_moved.len(), 4);
        // Settled: the profile of the round nearest the target (the first, 10.1 ms) is kept.
        f.settle_check();
        assert_eq!(f.cpu_handler, fitted.cpu_handler);
        assert_eq!(f.cpu_background, fitted.cpu_background);
        let toml = f.to_toml("2.2.0", "t", "now");
        assert!(toml.contains("\n# Checked on dn-sim: 1 MiB echo at one request in flight 10.00 ms on the target, 10.10, 12.00, 1.00, 1.00 ms on dn-sim"), "{toml}");
        assert!(
            toml.contains("round 1's profile kept: 0.000 ns/response B moved"),
            "{toml}"
        );
        // A later round nearer the target keeps its move.
        let mut g = fitted.clone();
        assert!(g.check_round(12.0));
        assert!(g.check_round(9.0));
        assert!(!g.check_round(10.05));
        let moved_then = g.check.as_ref().unwrap().rounds_moved[2];
        g.settle_check();
        assert_eq!(g.check.as_ref().unwrap().kept, Some(2));
        assert!((fitted.cpu_handler[2] - g.cpu_handler[2] - moved_then).abs() < 1e-9);
        assert!(toml.contains("\n\nformat = "), "{toml}");
        // Without the target's 1 MiB echo at one request in flight there is nothing to check.
        let f = fit(
            &cells[..2]
                .iter()
                .chain(&cells[4..])
                .cloned()
                .collect::<Vec<_>>(),
            2,
        )
        .unwrap();
        assert!(!f.checkable());
    }

    #[test]
    fn a_sleeping_handler_is_late_by_what_the_target_holds_beyond_the_baseline() {
        let slept = |pool: u32, calls: f64, baseline: bool| {
            let mut c = echo(pool, 32, 32, 0, calls, 1.0);
            (c.sleep_ms, c.baseline) = (5, baseline);
            c
        };
        // Pool 10 holds a handler 5.2 ms a call (10 / 1,923 calls/s), pool 2 5.25 ms; the
        // baseline (pool 10) 5.05 ms: 150 and 200 µs more, 175 on average, of which the
        // profile's handler cost pays a part.
        let cells = vec![
            echo(10, 1, 1, 0, 1e3 / 0.2, 0.2),
            echo(10, 32, 32, 0, 30_000.0, 1.0),
            slept(10, 10.0 / 5.2e-3, false),
            slept(2, 2.0 / 5.25e-3, false),
            slept(10, 10.0 / 5.05e-3, true),
        ];
        let f = fit(&cells, 2).unwrap();
        assert!(f.handler_us < 1.0, "{f:?}");
        assert!(
            (f.sleep_late_us + f.handler_us - 175.0).abs() < 1e-6,
            "{f:?}"
        );
        // The sleep cells are not 0 B echoes to the other steps: the loop and handler fit
        // only the sleepless 32 x 32 cell, which one request in flight already explains.
        let (_, _, m, p) = f
            .residuals
            .iter()
            .find(|r| r.0 == "echo resp=0B sleep=5ms pool=2 32x32")
            .unwrap();
        assert!((p / m - 1.0).abs() < 0.02, "{m} vs {p}");
        let toml = f.to_toml("2.2.0", "t", "now");
        let late = format!("[handler.sleep]\nlate_us = {:.3}\n", f.sleep_late_us);
        assert!(toml.contains(&late), "{toml}");
        assert_eq!(f.sleep_late_per_ms_us, 0.0, "one sleep length: no slope");
        // Without sleep cells, no lateness.
        let without = fit(&cells[..2], 2).unwrap();
        assert_eq!(without.sleep_late_us, 0.0);
    }

    #[test]
    fn a_longer_sleep_wakes_later_by_the_line_through_the_sleep_cells() {
        let slept = |pool: u32, sleep_ms: u32, hold_us: f64, baseline: bool| {
            let mut c = echo(pool, 32, 32, 0, f64::from(pool) / (hold_us / 1e6), 1.0);
            (c.sleep_ms, c.baseline) = (sleep_ms, baseline);
            c
        };
        // Pools 2 and 10 late by 120 and 110 µs after 1 ms, 280 and 140 after 5 ms, beyond a
        // baseline 30 µs late at both: the line 91.25 + 23.75 µs a ms (least squares).
        let cells = vec![
            echo(10, 1, 1, 0, 1e3 / 0.2, 0.2),
            echo(10, 32, 32, 0, 30_000.0, 1.0),
            slept(2, 1, 1150.0, false),
            slept(10, 1, 1140.0, false),
            slept(2, 5, 5310.0, false),
            slept(10, 5, 5170.0, false),
            slept(10, 1, 1030.0, true),
            slept(10, 5, 5030.0, true),
        ];
        let f = fit(&cells, 2).unwrap();
        let own = f.handler_us + f.cpu_handler[0];
        assert!(
            (f.sleep_late_us + own - 91.25).abs() < 1e-6,
            "intercept {f:?}"
        );
        assert!((f.sleep_late_per_ms_us - 23.75).abs() < 1e-6, "slope {f:?}");
        let toml = f.to_toml("2.2.0", "t", "now");
        let late = format!(
            "[handler.sleep]\nlate_us = {:.3}\nlate_per_ms_us = 23.750\n",
            f.sleep_late_us
        );
        assert!(toml.contains(&late), "{toml}");
        // Lateness that shrinks with the sleep is noise: no slope, the mean.
        assert_eq!(late_line(&[(1.0, 200.0), (5.0, 100.0)]), (150.0, 0.0));
        // A line that would start below 0 goes through the origin.
        let (a, b) = late_line(&[(1.0, 10.0), (5.0, 250.0)]);
        assert_eq!(a, 0.0);
        assert!((b - (10.0 + 1250.0) / 26.0).abs() < 1e-9, "{b}");
    }

    #[test]
    fn the_baselines_bytes_after_an_idle_wait_are_not_charged_to_the_target() {
        let mib = 1u64 << 20;
        let on_base = |mut c: Cell, sleep_ms: u32| {
            (c.baseline, c.sleep_ms) = (true, sleep_ms);
            c
        };
        // The target's 1 MiB echo takes 10 ms more than its 0 B one. The baseline moves a
        // MiB in 0.25 ms when its client never stops, in 0.8 ms after waiting 10 ms.
        let mut cells = vec![
            echo(10, 1, 1, 0, 1e3 / 0.2, 0.2),
            echo(10, 1, 1, mib, 1e3 / 10.2, 10.2),
            on_base(echo(0, 1, 1, 0, 1e4, 0.1), 0),
            on_base(echo(0, 1, 1, mib, 1e3 / 0.35, 0.35), 0),
        ];
        let ns = |ms: f64| ms * 1e6 / mib as f64;
        let f = fit(&cells, 2).unwrap();
        assert!((f.resp_ns_per_byte - ns(10.0 - 0.25)).abs() < 1e-6, "{f:?}");
        cells.push(on_base(echo(0, 1, 1, 0, 1e3 / 10.3, 10.3), 10));
        cells.push(on_base(echo(0, 1, 1, mib, 1e3 / 11.1, 11.1), 10));
        let f = fit(&cells, 2).unwrap();
        assert!((f.resp_ns_per_byte - ns(10.0 - 0.8)).abs() < 1e-6, "{f:?}");
        // The idle echoes are no sleep cells: no lateness without the target's.
        assert_eq!(f.sleep_late_us, 0.0);
    }

    #[test]
    fn without_a_single_request_echo_there_is_no_fit() {
        let e = fit(&[echo(10, 32, 32, 0, 1000.0, 1.0)], 2).unwrap_err();
        assert!(e.contains("one request in flight"), "{e}");
    }
}
