//! `--profile FILE`: what the DataNode's stages cost ([`crate::sim::stages`]), as a TOML file.
//!
//! A profile names the machine the modelled DataNode runs on (its cores: they size the gRPC
//! event loops below a pool of 10) and the Ozone release, gives each stage's cost per message and
//! per byte, and keeps the fit that produced them (where the numbers came from, and per measured
//! cell what was measured and what the model predicted). `kind` says whether a person wrote the
//! numbers (`example`) or a calibration fitted them (`measured`); dn-sim runs both alike.
//!
//! ```toml
//! format = "dn-sim-profile/1"
//! kind = "example"
//!
//! [machine]
//! cores = 2
//! ozone_release = "2.2.0"
//!
//! [event_loops.request]       # a request's cost to its connection's loop, on the way in
//! per_message_us = 20.0
//! per_byte_ns = 0.2
//! [event_loops.response]      # a response's cost to the same loop, on the way out
//! per_message_us = 15.0
//! per_byte_ns = 0.2
//!
//! [handler.request]           # the handler's own time per request (parse, dispatch) ...
//! per_message_us = 10.0
//! per_byte_ns = 0.3
//! [handler.response]          # ... and per response (build, serialize), beside injected delays
//! per_message_us = 5.0
//! per_byte_ns = 0.3
//! [handler.sleep]             # how late a handler wakes from an echo's sleep (Thread.sleep):
//! late_us = 100.0             # late_us + late_per_ms_us x the milliseconds asked
//! late_per_ms_us = 20.0
//! tail_share = 0.002          # and this share of sleeps wakes later still, by an exponential
//! tail_mean_per_ms_us = 3000.0 # time of this mean a millisecond asked
//!
//! [cpu.handler]               # CPU really spent on the handler before it answers ...
//! per_message_us = 8.0
//! per_request_byte_ns = 0.5
//! per_response_byte_ns = 1.0
//! per_write_chunk_us = 150.0  # (a WriteChunk's, beyond its message's and its bytes')
//! [cpu.background]            # ... and afterwards off the request's path (GC, flushes)
//! per_message_us = 12.0
//! per_response_byte_ns = 2.0
//! [cpu.capacity]              # the cores' worth the burns may take together (none: all)
//! cores = 1.6
//! [cpu.echo_payload]          # an echo's random payload, made under one lock a process
//! per_byte_ns = 6.0
//!
//! [latency]                   # the least time from a request's arrival to its answer,
//! floor_us = 40.0             # when it found the DataNode idle, and an exponential time of
//! jitter_mean_us = 20.0       # this mean beyond it
//!
//! [ratis.log]                 # the Ratis port's log worker, one thread a Raft group: CPU
//! per_entry_us = 3.0          # it spends writing each entry, and on each flush, then the
//! per_flush_us = 100.0        # device's sync it waits out; entries that come meanwhile
//! sync_us = 110.0             # share the next flush
//!
//! [fit]
//! source = "hand-written example"
//! [[fit.residuals]]
//! cell = "echo pool=2 sleep=0ms 32x32"
//! unit = "calls/s"
//! measured = 49700.0
//! predicted = 47000.0
//! ```
//!
//! Every stage table is optional (missing: costs nothing); unknown keys are errors, so a typo
//! is not silently a zero cost. Parsing is pure: the caller reads the file.

use crate::datanode::version::OzoneVersion;
use serde::Deserialize;
use std::time::Duration;

/// The only format this dn-sim reads.
pub const FORMAT: &str = "dn-sim-profile/1";

/// Bounds that keep a profile's numbers meaningful (and their products within `u64` ns).
const MAX_CORES: u32 = 4096;
const MAX_PER_MESSAGE_US: f64 = 10_000_000.0; // 10 s
const MAX_PER_BYTE_NS: f64 = 1_000_000.0; // 1 ms a byte

/// A parsed, checked profile.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub kind: ProfileKind,
    /// Processors of the modelled DataNode's machine (its JVM's `availableProcessors`).
    pub cores: usize,
    /// The release the profile was fitted on.
    pub release: OzoneVersion,
    /// `ozone_release` as written (e.g. `2.2.0`), for messages and `/config`.
    pub release_text: String,
    /// The gRPC event loops' costs: a request on the way in, a response on the way out.
    pub event_loop_request: MessageCost,
    pub event_loop_response: MessageCost,
    /// The handler's own time per request and per response.
    pub handler_request: MessageCost,
    pub handler_response: MessageCost,
    /// How much longer than asked an echo's sleep holds the handler: the real DataNode's
    /// `Thread.sleep` wakes late, the later the longer it slept (measured on Ozone 2.2.0 here,
    /// pools 1–16: 0.11–0.25 ms late after 1 ms, 0.14–0.42 ms after 5 ms), more so among many
    /// threads on few cores. The lateness is `handler_sleep_late` +
    /// `handler_sleep_late_per_ms` × the milliseconds asked.
    pub handler_sleep_late: Duration,
    pub handler_sleep_late_per_ms: Duration,
    /// The rare sleeps that wake much later (`[handler.sleep] tail_share`,
    /// `tail_mean_per_ms_us`); `None`: none. Why: a real DataNode's sleeping echoes at 32 in
    /// flight answer at a p99 1.2–1.4 × their p50 whatever the pool (Ozone 2.2.0 here, pools
    /// 1–16), where an even lateness gives dn-sim 1.0–1.04: a few wakes late by milliseconds
    /// delay every request queued behind them (one echo in flight alone, pool 4, 1 ms: p50
    /// 1.3 ms, p99 2.0, p99.9 4.4), the later the longer the sleep.
    pub handler_sleep_tail: Option<SleepTail>,
    /// CPU really spent (`sim::cpu`): on the handler before it answers, and in the background.
    pub cpu_handler: CpuCost,
    pub cpu_background: CpuCost,
    /// `[cpu.capacity] cores`: how many cores' worth the CPU stage's burns may take together
    /// (none: as many as the machine gives them).
    pub cpu_capacity_cores: Option<f64>,
    /// `[cpu.echo_payload] per_byte_ns`: CPU an echo's response payload costs per byte under
    /// one lock for the whole process (0: none). Why: a real DataNode (Ozone 2.0.0 to 2.2.0)
    /// makes the payload with commons-lang3's `RandomUtils` on a `SecureRandom` (the JDK's
    /// NativePRNG), whose SHA1PRNG mixing is `synchronized` on one instance a JVM: however many
    /// handlers and cores, one echo's payload is made at a time.
    pub cpu_echo_payload_ns_per_byte: f64,
    /// The least time from a request's arrival to its answer (thread hand-offs that cost no
    /// CPU); zero: none.
    pub latency_floor: Duration,
    /// The mean of an exponential time beyond the floor (`[latency] jitter_mean_us`); zero:
    /// none. Why: a real DataNode's idle hand-offs are not all alike (Ozone 2.2.0 here, 0 B
    /// echoes, one in flight: p50 0.21 ms, p99 0.43), where a floor of one length gave dn-sim
    /// p50 0.19, p99 0.29, and answered 11 % more calls a second.
    pub latency_jitter: Duration,
    /// `[ratis.log]`: the Ratis port's log worker (`sim::raft::LogWorker`); `None`: not
    /// modelled (a write's entry is logged at once, or after `--raft-log-*`'s device).
    pub ratis_log: Option<LogWorkerCost>,
    pub fit: Fit,
}

/// `[ratis.log]`: what a Raft group's log worker spends (`sim::raft::LogWorker`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogWorkerCost {
    /// CPU to write one entry to the open segment (its proto, its checksum, the buffer).
    pub per_entry: Duration,
    /// CPU of one flush, whatever the entries it makes durable (the buffer to the file, the
    /// system call).
    pub per_flush: Duration,
    /// The device's time to make a flush durable (`force`), which the worker waits out without
    /// CPU.
    pub sync: Duration,
}

impl LogWorkerCost {
    pub fn is_zero(&self) -> bool {
        self.per_entry.is_zero() && self.per_flush.is_zero() && self.sync.is_zero()
    }
}

/// A share of sleeps that wake late by an exponentially distributed extra time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SleepTail {
    /// The share of sleeps (0 to 1) that wake late by the tail's time.
    pub share: f64,
    /// The mean of the extra time a millisecond the echo asked to sleep.
    pub mean_per_ms: Duration,
}

/// Who produced the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileKind {
    /// Written by hand to show the format or to explore; no claim about any DataNode.
    Example,
    /// Fitted by a calibration against a real DataNode (`fit` says which and how well).
    Measured,
}

/// What one message costs a stage: a fixed part and a part per byte of the message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageCost {
    #[serde(default)]
    pub per_message_us: f64,
    #[serde(default)]
    pub per_byte_ns: f64,
}

impl MessageCost {
    /// True when every message costs nothing.
    pub fn is_zero(&self) -> bool {
        self.per_message_us == 0.0 && self.per_byte_ns == 0.0
    }

    /// The cost of a message of `bytes` bytes, in nanoseconds.
    pub fn nanos(&self, bytes: usize) -> u64 {
        // Both parts are bounded when parsed, so this stays far below u64::MAX for any message
        // up to the 32 MiB limit (and saturates beyond).
        (self.per_message_us * 1e3 + self.per_byte_ns * bytes as f64) as u64
    }

    pub fn of(&self, bytes: usize) -> Duration {
        Duration::from_nanos(self.nanos(bytes))
    }

    fn check(&self, name: &str) -> Result<(), String> {
        let ok = |v: f64, max: f64| v.is_finite() && (0.0..=max).contains(&v);
        if !ok(self.per_message_us, MAX_PER_MESSAGE_US) {
            return Err(format!(
                "{name}.per_message_us must be from 0 to {MAX_PER_MESSAGE_US} (µs), not {}",
                self.per_message_us
            ));
        }
        if !ok(self.per_byte_ns, MAX_PER_BYTE_NS) {
            return Err(format!(
                "{name}.per_byte_ns must be from 0 to {MAX_PER_BYTE_NS} (ns), not {}",
                self.per_byte_ns
            ));
        }
        Ok(())
    }
}

/// A time in µs, checked as a per-message cost is; the error names `name`.
fn micros(us: f64, name: &str) -> Result<Duration, String> {
    if !(us.is_finite() && (0.0..=MAX_PER_MESSAGE_US).contains(&us)) {
        return Err(format!(
            "{name} must be from 0 to {MAX_PER_MESSAGE_US} (µs), not {us}"
        ));
    }
    Ok(Duration::from_nanos((us * 1e3) as u64))
}

/// CPU time a request costs: a fixed part and parts per byte of the request and of its response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuCost {
    #[serde(default)]
    pub per_message_us: f64,
    #[serde(default)]
    pub per_request_byte_ns: f64,
    #[serde(default)]
    pub per_response_byte_ns: f64,
    /// A WriteChunk's CPU beyond a message's and its bytes': `loadgen calibrate` fits it from
    /// loaded writes of two chunk sizes (on the 2-core machine with Ozone 2.2.0 it found none:
    /// 64 KB and 1 MB chunks cost the machine their bytes and no more).
    #[serde(default)]
    pub per_write_chunk_us: f64,
}

impl CpuCost {
    pub fn is_zero(&self) -> bool {
        self.per_message_us == 0.0
            && self.per_request_byte_ns == 0.0
            && self.per_response_byte_ns == 0.0
            && self.per_write_chunk_us == 0.0
    }

    /// The CPU time of a request of `request` bytes answered with `response` bytes, in ns;
    /// `write_chunk`: the request is a WriteChunk.
    pub fn nanos(&self, request: usize, response: usize, write_chunk: bool) -> u64 {
        let chunk_us = if write_chunk {
            self.per_write_chunk_us
        } else {
            0.0
        };
        ((self.per_message_us + chunk_us) * 1e3
            + self.per_request_byte_ns * request as f64
            + self.per_response_byte_ns * response as f64) as u64
    }

    fn check(&self, name: &str) -> Result<(), String> {
        MessageCost {
            per_message_us: self.per_message_us,
            per_byte_ns: self.per_request_byte_ns,
        }
        .check(name)
        .map_err(|e| e.replace("per_byte_ns", "per_request_byte_ns"))?;
        MessageCost {
            per_message_us: 0.0,
            per_byte_ns: self.per_response_byte_ns,
        }
        .check(name)
        .map_err(|e| e.replace("per_byte_ns", "per_response_byte_ns"))?;
        MessageCost {
            per_message_us: self.per_write_chunk_us,
            per_byte_ns: 0.0,
        }
        .check(name)
        .map_err(|e| e.replace("per_message_us", "per_write_chunk_us"))
    }
}

/// Where the numbers came from: for calibration to fill, for people to read.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fit {
    /// What was measured (a DataNode's address and build, or "hand-written example").
    #[serde(default)]
    pub source: String,
    /// When (free text, e.g. an RFC 3339 time).
    #[serde(default)]
    pub measured_at: String,
    #[serde(default)]
    pub residuals: Vec<Residual>,
}

/// One measured cell against the model's prediction for it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Residual {
    /// The cell, e.g. `echo pool=2 sleep=0ms 32x32`.
    pub cell: String,
    /// What `measured` and `predicted` count, e.g. `calls/s`, `MB/s`, `p99 ms`.
    pub unit: String,
    pub measured: f64,
    pub predicted: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: String,
    kind: ProfileKind,
    machine: Machine,
    #[serde(default)]
    event_loops: Pair,
    #[serde(default)]
    handler: HandlerTables,
    #[serde(default)]
    cpu: CpuPair,
    #[serde(default)]
    latency: Latency,
    #[serde(default)]
    ratis: RatisTables,
    #[serde(default)]
    fit: Fit,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RatisTables {
    #[serde(default)]
    log: Option<RatisLog>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RatisLog {
    #[serde(default)]
    per_entry_us: f64,
    #[serde(default)]
    per_flush_us: f64,
    #[serde(default)]
    sync_us: f64,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HandlerTables {
    #[serde(default)]
    request: MessageCost,
    #[serde(default)]
    response: MessageCost,
    #[serde(default)]
    sleep: Sleep,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sleep {
    #[serde(default)]
    late_us: f64,
    #[serde(default)]
    late_per_ms_us: f64,
    #[serde(default)]
    tail_share: f64,
    #[serde(default)]
    tail_mean_per_ms_us: f64,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Latency {
    #[serde(default)]
    floor_us: f64,
    #[serde(default)]
    jitter_mean_us: f64,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CpuPair {
    #[serde(default)]
    handler: CpuCost,
    #[serde(default)]
    background: CpuCost,
    #[serde(default)]
    capacity: Option<CpuCapacity>,
    #[serde(default)]
    echo_payload: EchoPayloadCost,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EchoPayloadCost {
    #[serde(default)]
    per_byte_ns: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CpuCapacity {
    cores: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Machine {
    cores: u32,
    ozone_release: String,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pair {
    #[serde(default)]
    request: MessageCost,
    #[serde(default)]
    response: MessageCost,
}

impl Profile {
    /// Parses and checks a profile's text; the error is one line (with the line number of a
    /// syntax or type error).
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: File = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let message = e.message().trim().replace('\n', " ");
            match line {
                Some(n) => format!("line {n}: {message}"),
                None => message,
            }
        })?;
        if file.format != FORMAT {
            return Err(format!(
                "format must be \"{FORMAT}\", not \"{}\"",
                file.format
            ));
        }
        if !(1..=MAX_CORES).contains(&file.machine.cores) {
            return Err(format!(
                "machine.cores must be from 1 to {MAX_CORES}, not {}",
                file.machine.cores
            ));
        }
        let release: OzoneVersion = file
            .machine
            .ozone_release
            .parse()
            .map_err(|e| format!("machine.ozone_release: {e}"))?;
        file.event_loops.request.check("event_loops.request")?;
        file.event_loops.response.check("event_loops.response")?;
        file.handler.request.check("handler.request")?;
        file.handler.response.check("handler.response")?;
        file.cpu.handler.check("cpu.handler")?;
        file.cpu.background.check("cpu.background")?;
        let cpu_capacity_cores = match &file.cpu.capacity {
            Some(c)
                if c.cores.is_finite()
                    && c.cores > 0.0
                    && c.cores <= f64::from(file.machine.cores) =>
            {
                Some(c.cores)
            }
            Some(c) => {
                return Err(format!(
                    "cpu.capacity.cores must be above 0 and at most machine.cores ({}), not {}",
                    file.machine.cores, c.cores
                ));
            }
            None => None,
        };
        MessageCost {
            per_message_us: 0.0,
            per_byte_ns: file.cpu.echo_payload.per_byte_ns,
        }
        .check("cpu.echo_payload")?;
        let latency_floor = micros(file.latency.floor_us, "latency.floor_us")?;
        let latency_jitter = micros(file.latency.jitter_mean_us, "latency.jitter_mean_us")?;
        let handler_sleep_late = micros(file.handler.sleep.late_us, "handler.sleep.late_us")?;
        let handler_sleep_late_per_ms = micros(
            file.handler.sleep.late_per_ms_us,
            "handler.sleep.late_per_ms_us",
        )?;
        let tail_share = file.handler.sleep.tail_share;
        if !(0.0..=1.0).contains(&tail_share) {
            return Err(format!(
                "handler.sleep.tail_share must be from 0 to 1, not {tail_share}"
            ));
        }
        let tail_mean_per_ms = micros(
            file.handler.sleep.tail_mean_per_ms_us,
            "handler.sleep.tail_mean_per_ms_us",
        )?;
        let ratis_log = match &file.ratis.log {
            Some(log) => {
                let cost = LogWorkerCost {
                    per_entry: micros(log.per_entry_us, "ratis.log.per_entry_us")?,
                    per_flush: micros(log.per_flush_us, "ratis.log.per_flush_us")?,
                    sync: micros(log.sync_us, "ratis.log.sync_us")?,
                };
                (!cost.is_zero()).then_some(cost)
            }
            None => None,
        };
        let handler_sleep_tail =
            (tail_share > 0.0 && !tail_mean_per_ms.is_zero()).then_some(SleepTail {
                share: tail_share,
                mean_per_ms: tail_mean_per_ms,
            });
        for r in &file.fit.residuals {
            if !(r.measured.is_finite() && r.predicted.is_finite()) {
                return Err(format!(
                    "fit.residuals: cell \"{}\" needs finite measured and predicted values",
                    r.cell
                ));
            }
        }
        Ok(Profile {
            kind: file.kind,
            cores: file.machine.cores as usize,
            release,
            release_text: file.machine.ozone_release,
            event_loop_request: file.event_loops.request,
            event_loop_response: file.event_loops.response,
            handler_request: file.handler.request,
            handler_response: file.handler.response,
            handler_sleep_late,
            handler_sleep_late_per_ms,
            handler_sleep_tail,
            cpu_handler: file.cpu.handler,
            cpu_background: file.cpu.background,
            cpu_capacity_cores,
            cpu_echo_payload_ns_per_byte: file.cpu.echo_payload.per_byte_ns,
            latency_floor,
            latency_jitter,
            ratis_log,
            fit: file.fit,
        })
    }

    /// Reads and parses `path`; the error is one line naming the file.
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// True when no stage costs anything: dn-sim then runs as without a profile.
    pub fn is_free(&self) -> bool {
        self.event_loop_request.is_zero()
            && self.event_loop_response.is_zero()
            && self.handler_request.is_zero()
            && self.handler_response.is_zero()
            && self.handler_sleep_late.is_zero()
            && self.handler_sleep_late_per_ms.is_zero()
            && self.handler_sleep_tail.is_none()
            && self.cpu_handler.is_zero()
            && self.cpu_background.is_zero()
            && self.cpu_echo_payload_ns_per_byte == 0.0
            && self.latency_floor.is_zero()
            && self.latency_jitter.is_zero()
            && self.ratis_log.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "format = \"dn-sim-profile/1\"\nkind = \"example\"\n\
                           [machine]\ncores = 2\nozone_release = \"2.2.0\"\n";

    #[test]
    fn the_documented_example_parses() {
        let doc = include_str!("profile.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| l.strip_prefix("//!").unwrap_or(l).trim_start().to_string() + "\n")
            .collect();
        let p = Profile::parse(&example).unwrap();
        assert_eq!(
            (p.kind, p.cores, p.release),
            (ProfileKind::Example, 2, OzoneVersion::V2_2)
        );
        assert_eq!(p.event_loop_request.nanos(1000), 20_000 + 200);
        assert_eq!(p.handler_response.of(0), Duration::from_micros(5));
        assert_eq!(p.fit.residuals.len(), 1);
        assert_eq!(p.cpu_handler.nanos(1000, 2000, false), 8_000 + 500 + 2_000);
        assert_eq!(p.cpu_handler.nanos(1000, 0, true), 8_000 + 150_000 + 500);
        assert_eq!(p.cpu_background.nanos(1000, 0, true), 12_000);
        assert_eq!(p.cpu_capacity_cores, Some(1.6));
        assert_eq!(p.cpu_echo_payload_ns_per_byte, 6.0);
        assert_eq!(p.latency_floor, Duration::from_micros(40));
        assert_eq!(p.latency_jitter, Duration::from_micros(20));
        assert_eq!(
            p.ratis_log,
            Some(LogWorkerCost {
                per_entry: Duration::from_micros(3),
                per_flush: Duration::from_micros(100),
                sync: Duration::from_micros(110),
            })
        );
        assert_eq!(p.handler_sleep_late, Duration::from_micros(100));
        assert_eq!(p.handler_sleep_late_per_ms, Duration::from_micros(20));
        assert_eq!(
            p.handler_sleep_tail,
            Some(SleepTail {
                share: 0.002,
                mean_per_ms: Duration::from_millis(3)
            })
        );
        assert!(!p.is_free());
    }

    #[test]
    fn the_shipped_example_profile_parses_and_says_it_is_an_example() {
        let text = include_str!("../../../deploy/profiles/example-2cores-ozone-2.2.0.toml");
        let p = Profile::parse(text).unwrap();
        assert_eq!(p.kind, ProfileKind::Example);
        assert!(!p.is_free());
    }

    #[test]
    fn the_shipped_measured_profile_parses_and_carries_its_fit() {
        let text = include_str!("../../../deploy/profiles/measured-2cores-ozone-2.2.0.toml");
        let p = Profile::parse(text).unwrap();
        assert_eq!(
            (p.kind, p.cores, p.release),
            (ProfileKind::Measured, 2, OzoneVersion::V2_2)
        );
        assert!(!p.is_free());
        assert!(p.fit.residuals.len() >= 10, "{:?}", p.fit);
    }

    #[test]
    fn stage_tables_are_optional_and_cost_nothing() {
        let p = Profile::parse(MINIMAL).unwrap();
        assert!(p.is_free());
        assert_eq!(p.cpu_echo_payload_ns_per_byte, 0.0);
        assert_eq!(p.event_loop_request.nanos(1 << 20), 0);
        assert_eq!(p.release_text, "2.2.0");
        assert_eq!(p.ratis_log, None);
        // A log worker that costs nothing is no log worker.
        let free_log = format!("{MINIMAL}[ratis.log]\nper_entry_us = 0.0\n");
        assert!(Profile::parse(&free_log).unwrap().is_free());
        let flush_only = format!("{MINIMAL}[ratis.log]\nper_flush_us = 80.0\n");
        let p = Profile::parse(&flush_only).unwrap();
        assert_eq!(
            p.ratis_log.map(|c| (c.per_entry, c.per_flush)),
            Some((Duration::ZERO, Duration::from_micros(80)))
        );
        let sync_only = format!("{MINIMAL}[ratis.log]\nsync_us = 200.0\n");
        assert_eq!(
            Profile::parse(&sync_only)
                .unwrap()
                .ratis_log
                .map(|c| c.sync),
            Some(Duration::from_micros(200))
        );
        assert!(!p.is_free());
    }

    #[test]
    fn bad_profiles_are_one_line_errors_naming_the_problem() {
        let cases: &[(&str, &str)] = &[
            ("", "missing field `format`"),
            ("format = 1", "line 1"),
            (
                &MINIMAL.replace("dn-sim-profile/1", "dn-sim-profile/9"),
                "format must be \"dn-sim-profile/1\"",
            ),
            (
                &MINIMAL.replace("example", "guess"),
                "unknown variant `guess`",
            ),
            (
                &MINIMAL.replace("cores = 2", "cores = 0"),
                "machine.cores must be",
            ),
            (&MINIMAL.replace("cores = 2", "cores = -1"), "line 4"),
            (&MINIMAL.replace("2.2.0", "1.4.1"), "machine.ozone_release"),
            (
                &format!("{MINIMAL}[event_loops.request]\nper_message_us = -1.0\n"),
                "event_loops.request.per_message_us must be from 0",
            ),
            (
                &format!("{MINIMAL}[handler.response]\nper_byte_ns = nan\n"),
                "handler.response.per_byte_ns must be from 0",
            ),
            (
                &format!("{MINIMAL}[handler.request]\nper_mesage_us = 3.0\n"),
                "unknown field `per_mesage_us`",
            ),
            (
                &format!("{MINIMAL}[cpu]\ncores = 2\n"),
                "unknown field `cores`",
            ),
            (
                &format!("{MINIMAL}[cpu.capacity]\ncores = 0.0\n"),
                "cpu.capacity.cores must be above 0 and at most machine.cores (2), not 0",
            ),
            (
                &format!("{MINIMAL}[cpu.capacity]\ncores = 2.5\n"),
                "cpu.capacity.cores must be above 0 and at most machine.cores (2), not 2.5",
            ),
            (
                &format!("{MINIMAL}[cpu.echo_payload]\nper_byte_ns = -1.0\n"),
                "cpu.echo_payload.per_byte_ns must be from 0",
            ),
            (
                &format!("{MINIMAL}[cpu.echo_payload]\nper_message_us = 1.0\n"),
                "unknown field `per_message_us`",
            ),
            (
                &format!("{MINIMAL}[cpu.background]\nper_response_byte_ns = -2.0\n"),
                "cpu.background.per_response_byte_ns must be from 0",
            ),
            (
                &format!("{MINIMAL}[cpu.handler]\nper_write_chunk_us = nan\n"),
                "cpu.handler.per_write_chunk_us must be from 0",
            ),
            (
                &format!("{MINIMAL}[latency]\nfloor_us = inf\n"),
                "latency.floor_us must be from 0",
            ),
            (
                &format!("{MINIMAL}[latency]\njitter_mean_us = -5.0\n"),
                "latency.jitter_mean_us must be from 0",
            ),
            (
                &format!("{MINIMAL}[ratis.log]\nper_flush_us = -1.0\n"),
                "ratis.log.per_flush_us must be from 0",
            ),
            (
                &format!("{MINIMAL}[ratis.log]\nper_entry_us = nan\n"),
                "ratis.log.per_entry_us must be from 0",
            ),
            (
                &format!("{MINIMAL}[ratis.log]\nsync_us = -0.5\n"),
                "ratis.log.sync_us must be from 0",
            ),
            (
                &format!("{MINIMAL}[ratis.log]\nper_sync_us = 1.0\n"),
                "unknown field `per_sync_us`",
            ),
            (
                &format!("{MINIMAL}[ratis.apply]\nper_entry_us = 1.0\n"),
                "unknown field `apply`",
            ),
            (
                &format!("{MINIMAL}[handler.sleep]\nlate_us = -1.0\n"),
                "handler.sleep.late_us must be from 0",
            ),
            (
                &format!("{MINIMAL}[handler.sleep]\nlate_per_ms_us = nan\n"),
                "handler.sleep.late_per_ms_us must be from 0",
            ),
            (
                &format!("{MINIMAL}[handler.sleep]\nlate_ms = 1.0\n"),
                "unknown field `late_ms`",
            ),
            (
                &format!("{MINIMAL}[handler.sleep]\ntail_share = 1.5\n"),
                "handler.sleep.tail_share must be from 0 to 1",
            ),
            (
                &format!("{MINIMAL}[handler.sleep]\ntail_share = nan\n"),
                "handler.sleep.tail_share must be from 0 to 1",
            ),
            (
                &format!("{MINIMAL}[handler.sleep]\ntail_mean_per_ms_us = -3.0\n"),
                "handler.sleep.tail_mean_per_ms_us must be from 0",
            ),
            (
                &format!(
                    "{MINIMAL}[[fit.residuals]]\ncell = \"c\"\nunit = \"calls/s\"\n\
                     measured = inf\npredicted = 1.0\n"
                ),
                "cell \"c\" needs finite",
            ),
            (
                "format = \"dn-sim-profile/1\"\nkind = \"example\"\n[machine\n",
                "line 3",
            ),
        ];
        for (text, expected) in cases {
            let e = Profile::parse(text).unwrap_err();
            assert!(e.contains(expected), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{text:?}: not one line: {e}");
        }
    }

    #[test]
    fn a_missing_file_names_it() {
        let e = Profile::load(std::path::Path::new("/nonexistent/p.toml")).unwrap_err();
        assert!(e.starts_with("/nonexistent/p.toml: No such file"), "{e}");
    }
}
