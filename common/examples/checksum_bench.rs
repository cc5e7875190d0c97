//! CRC32 and CRC32C throughput of `common::checksum` and of every candidate CRC crate, for
//! comparison with Java 17's `java.util.zip.CRC32`/`CRC32C` (scripts/java/ChecksumBench.java;
//! scripts/bench-checksum.sh runs both, at several buffer sizes, and prints one table).
//!
//! Both sides compute the same thing: one checksum per 16 KiB window over a buffer (4 MiB by
//! default: Ozone's default `ozone.client.bytes.per.checksum` and chunk size), repeated for about
//! 1.5 s per figure. The buffer holds the same pseudo-random bytes on both sides, so the printed
//! checksum of the last window must agree. The buffer starts `--align` bytes (default 16) past a
//! 64-byte boundary; ChecksumBench.java's `--align` places its buffer the same way.
//!
//! ```text
//! cargo run --release -p common --example checksum_bench -- [--seconds 1.5] [--buffer-mib 4 | --buffer-kib 4096] [--window-kib 16] [--round N] [--align 16]
//! ```
//!
//! Per algorithm: `common` is `Checksum::compute` (builds the whole `ChecksumData`, as a client
//! does per chunk, with the crate named by `common::checksum::CRC32_CRATE` / `CRC32C_CRATE`); the
//! others are the bare per-window calls of each candidate crate: crc32fast and crc-fast for CRC32
//! (ISO-HDLC, zlib's), crc32c and crc-fast for CRC32C (iSCSI). Before measuring, every candidate's
//! checksum of every window is compared with `common`'s; any difference fails the run. `--round N`
//! rotates the measuring order (so no implementation always runs first). GB/s means 10^9 bytes per
//! second; each figure is given per wall-clock second and per second of the measuring thread's CPU
//! time (the latter is steadier on a machine shared with other work).

use common::checksum::{self, Checksum};
use common::proto::ChecksumType;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

struct Args {
    seconds: f64,
    buffer: usize,
    window: usize,
    round: usize,
    align: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seconds: 1.5,
        buffer: 4 << 20,
        window: 16 << 10,
        round: 1,
        align: 16,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => {
                args.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?
            }
            "--buffer-mib" => {
                args.buffer = value()?
                    .parse::<usize>()
                    .map_err(|e| format!("--buffer-mib: {e}"))?
                    << 20
            }
            "--buffer-kib" => {
                args.buffer = value()?
                    .parse::<usize>()
                    .map_err(|e| format!("--buffer-kib: {e}"))?
                    << 10
            }
            "--window-kib" => {
                args.window = value()?
                    .parse::<usize>()
                    .map_err(|e| format!("--window-kib: {e}"))?
                    << 10
            }
            "--round" => args.round = value()?.parse().map_err(|e| format!("--round: {e}"))?,
            "--align" => args.align = value()?.parse().map_err(|e| format!("--align: {e}"))?,
            "-h" | "--help" => {
                return Err(
                    "usage: checksum_bench [--seconds S] [--buffer-mib N | --buffer-kib N] \
                            [--window-kib K] [--round N] [--align A]"
                        .into(),
                );
            }
            other => return Err(format!("unknown argument {other} (try --help)")),
        }
    }
    let seconds_ok = Duration::try_from_secs_f64(args.seconds).is_ok_and(|d| !d.is_zero());
    if !seconds_ok || args.buffer == 0 || args.window == 0 {
        return Err("--seconds, the buffer size and --window-kib must be positive".into());
    }
    if args.align >= ALIGN {
        return Err(format!("--align must be below {ALIGN}"));
    }
    if u32::try_from(args.window).is_err() {
        return Err("--window-kib is too large".into());
    }
    Ok(args)
}

/// The same generator as ChecksumBench.java: a 64-bit LCG (Knuth's MMIX constants), one byte per
/// step from the top 8 bits.
fn fill(buf: &mut [u8]) {
    let mut x: u64 = 0x0123_4567_89ab_cdef;
    for b in buf {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *b = (x >> 56) as u8;
    }
}

struct Measurement {
    /// Bytes per wall-clock second, in 10^9.
    gbps: f64,
    /// Bytes per second of this thread's CPU time, in 10^9 (less sensitive to other load on the
    /// machine); `None` where the kernel does not report it.
    cpu_gbps: Option<f64>,
    bytes: u64,
    secs: f64,
    last: u32,
}

/// CPU time this thread has run, in nanoseconds (Linux: first field of
/// `/proc/thread-self/schedstat`). Java's side uses `ThreadMXBean.getCurrentThreadCpuTime`.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Runs `pass` (one pass over the buffer, returning the last window's CRC) until `seconds` have
/// passed.
fn measure(buffer_len: usize, seconds: f64, mut pass: impl FnMut() -> u32) -> Measurement {
    let budget = Duration::from_secs_f64(seconds);
    // Short warm-up: page in the buffer, let the clock settle.
    let warm = Instant::now();
    while warm.elapsed() < budget / 10 {
        black_box(pass());
    }
    let cpu_start = thread_cpu_ns();
    let start = Instant::now();
    let mut passes = 1u64;
    let mut last = black_box(pass());
    while start.elapsed() < budget {
        last = black_box(pass());
        passes += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu_secs = match (cpu_start, thread_cpu_ns()) {
        (Some(a), Some(b)) if b > a => Some((b - a) as f64 / 1e9),
        _ => None,
    };
    let bytes = passes * buffer_len as u64;
    Measurement {
        gbps: bytes as f64 / secs / 1e9,
        cpu_gbps: cpu_secs.map(|c| bytes as f64 / c / 1e9),
        bytes,
        secs,
        last,
    }
}

/// The buffer starts `--align` bytes past a multiple of this (a cache line; the AVX-512 CRC code
/// of crc32fast and crc-fast, and Java's CRC32/CRC32C intrinsics, run up to ~20 % faster on a
/// 64-byte-aligned buffer). The default, 16, is what glibc's malloc gives a large buffer.
const ALIGN: usize = 64;

/// One CRC implementation as the benchmark calls it: the checksum of one whole window.
type WindowCrc = fn(&[u8]) -> u32;

/// The candidate crates for one algorithm, as (name, per-window call).
fn candidates(kind: ChecksumType) -> [(&'static str, WindowCrc); 2] {
    match kind {
        ChecksumType::Crc32 => [
            ("crc32fast", crc32fast::hash),
            ("crc-fast", crc_fast::crc32_iso_hdlc),
        ],
        ChecksumType::Crc32c => [
            ("crc32c", crc32c::crc32c),
            ("crc-fast", crc_fast::crc32_iscsi),
        ],
        other => unreachable!("{other:?} is not a CRC"),
    }
}

/// The CRCs of `checksum.compute(buf)`, one per window.
fn common_crcs(checksum: &Checksum, buf: &[u8]) -> Vec<u32> {
    checksum
        .compute(buf)
        .checksums
        .iter()
        .map(|c| u32::from_be_bytes(c[..].try_into().expect("CRCs are 4 bytes")))
        .collect()
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut backing = vec![0u8; args.buffer + ALIGN + args.align];
    let start = backing.as_ptr().align_offset(ALIGN) + args.align;
    let buf = &mut backing[start..start + args.buffer];
    fill(buf);
    let buf = &*buf;
    let windows = args.buffer.div_ceil(args.window);
    println!(
        "Rust checksum throughput: {} windows of {} bytes over a {}-byte buffer {} bytes past a \
         {ALIGN}-byte boundary, ~{} s per figure; GB/s = 10^9 bytes/s; crc-fast uses {}",
        windows,
        args.window,
        args.buffer,
        args.align,
        args.seconds,
        crc_fast::get_calculator_target(crc_fast::CrcAlgorithm::Crc32IsoHdlc)
    );

    for (name, kind, common_crate) in [
        ("CRC32", ChecksumType::Crc32, checksum::CRC32_CRATE),
        ("CRC32C", ChecksumType::Crc32c, checksum::CRC32C_CRATE),
    ] {
        let checksum = Checksum::new(kind, args.window as u32).expect("window checked above");
        let candidates = candidates(kind);

        // Every candidate must give common's checksum for every window.
        let expected = common_crcs(&checksum, buf);
        for (crate_name, crc) in candidates {
            let got: Vec<u32> = buf.chunks(args.window).map(crc).collect();
            if let Some(w) = (0..windows).find(|&w| got[w] != expected[w]) {
                eprintln!(
                    "{name}: {crate_name} gives 0x{:08x} for window {w}, common ({common_crate}) \
                     0x{:08x}",
                    got[w], expected[w]
                );
                return ExitCode::FAILURE;
            }
        }

        // Index 0 is common, 1.. the candidates; rotated by the round number.
        let count = candidates.len() + 1;
        let mut results: Vec<Option<Measurement>> = (0..count).map(|_| None).collect();
        for i in 0..count {
            let which = (i + args.round) % count;
            let m = if which == 0 {
                measure(args.buffer, args.seconds, || {
                    let cd = checksum.compute(black_box(buf));
                    let last = cd.checksums.last().expect("buffer is not empty");
                    u32::from_be_bytes(last[..4].try_into().expect("CRCs are 4 bytes"))
                })
            } else {
                let crc = candidates[which - 1].1;
                measure(args.buffer, args.seconds, || {
                    let mut last = 0;
                    for w in black_box(buf).chunks(args.window) {
                        last = black_box(crc(w));
                    }
                    last
                })
            };
            results[which] = Some(m);
        }

        let common_label = format!("common ({common_crate})");
        let labels = std::iter::once(("common", common_label.as_str()))
            .chain(candidates.iter().map(|&(c, _)| (c, c)));
        for ((impl_name, label), m) in labels.zip(results.iter().flatten()) {
            let cpu = m.cpu_gbps.map_or("n/a".to_string(), |g| format!("{g:.3}"));
            println!(
                "{name:<7} {label:<20} {:>7.2} GB/s wall, {:>7} GB/s per CPU-second   \
                 last window checksum 0x{:08x}",
                m.gbps,
                m.cpu_gbps.map_or("n/a".to_string(), |g| format!("{g:.2}")),
                m.last
            );
            println!(
                "RESULT impl={impl_name} algo={name} buffer={} align={} gbps={:.3} \
                 cpu_gbps={cpu} last=0x{:08x} bytes={} secs={:.3} uses={}",
                args.buffer,
                args.align,
                m.gbps,
                m.last,
                m.bytes,
                m.secs,
                if impl_name == "common" {
                    common_crate
                } else {
                    impl_name
                }
            );
        }
    }

    // A reference beside the CRCs: only reading the buffer (an XOR of its 64-bit words, eight
    // accumulators), no CRC. Where a CRC runs as fast as this, the memory system sets the pace
    // and no implementation can be faster.
    let (words, tail) = buf.split_at(buf.len() / 64 * 64);
    let m = measure(args.buffer, args.seconds, || {
        let mut acc = [0u64; 8];
        for line in black_box(words).chunks_exact(64) {
            for (a, w) in acc.iter_mut().zip(line.chunks_exact(8)) {
                *a ^= u64::from_ne_bytes(w.try_into().expect("8 bytes"));
            }
        }
        let folded = acc.iter().fold(0u64, |x, a| x ^ a) ^ tail.len() as u64;
        (folded ^ (folded >> 32)) as u32
    });
    println!(
        "READ    {:<20} {:>7.2} GB/s wall, {:>7} GB/s per CPU-second",
        "xor of the buffer",
        m.gbps,
        m.cpu_gbps.map_or("n/a".to_string(), |g| format!("{g:.2}")),
    );
    println!(
        "RESULT impl=read algo=READ buffer={} align={} gbps={:.3} cpu_gbps={} last=0x{:08x} \
         bytes={} secs={:.3} uses=xor",
        args.buffer,
        args.align,
        m.gbps,
        m.cpu_gbps.map_or("n/a".to_string(), |g| format!("{g:.3}")),
        m.last,
        m.bytes,
        m.secs,
    );
    ExitCode::SUCCESS
}
