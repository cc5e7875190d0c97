//! Flags of `loadgen write` and `loadgen read`. Sizes use Ozone's units: KB, MB and GB are powers
//! of 1024 (`4MB` = 4 × 2^20 bytes).

use crate::cli::{ReportArgs, parse_duration};
use crate::workload::block_writer::ChecksumMode;
use clap::{ArgAction, Args, ValueEnum};
use common::proto::ChecksumType;
use std::path::PathBuf;
use std::time::Duration;

/// Where to send and how concurrently (the subset of `echo`'s options that `write`/`read` use).
#[derive(Args, Debug, Clone)]
pub struct ConnArgs {
    /// DataNode client port, HOST:PORT. Without it an embedded dn-sim is started on 127.0.0.1
    /// (store `discard` for a write-only run, `memory` when data is read back).
    #[arg(long, value_name = "HOST:PORT")]
    pub target: Option<String>,

    /// Number of application write() calls, over all workers [default: 1000 unless --duration].
    /// A `read` without --manifest writes its data set this way first.
    #[arg(short = 'n', long = "number-of-tests", value_parser = clap::value_parser!(u64).range(1..))]
    pub number_of_tests: Option<u64>,

    /// Workers, each an Ozone output stream writing its own blocks with one RPC outstanding.
    #[arg(short = 't', long = "threads", visible_alias = "thread", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub threads: u32,

    /// Write for this long instead of -n writes (e.g. 5s, 1m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// gRPC connections; worker i uses connection i mod clients.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub clients: u32,

    /// Container the blocks go to; it must exist and be open on the DataNode.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1)]
    pub container_id: i64,

    /// datanodeUuid sent in every request.
    #[arg(long, default_value = "loadgen")]
    pub datanode_uuid: String,

    /// Per-request deadline.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// How long to wait for each connection.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,

    /// loadgen's runtime threads [default: half the cores, at least 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub runtime_threads: Option<u32>,

    /// Runtime threads of the embedded dn-sim (only without --target).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub embedded_threads: u32,

    /// Retries and client throttling of each WriteChunk, PutBlock, GetBlock and ReadChunk.
    #[command(flatten)]
    pub resilience: crate::cli::ResilienceArgs,
}

/// What the application and its output stream do (Ozone's client configuration).
#[derive(Args, Debug, Clone)]
pub struct ShapeArgs {
    /// Size of each application write() (1 KB = 1024 bytes), at most 32 MB.
    #[arg(long, default_value = "1MB", value_name = "SIZE", value_parser = parse_write_size)]
    pub write_size: u64,

    /// Chunk size, ozone.scm.chunk.size: one WriteChunk per full chunk (at most 32 MB).
    #[arg(long, default_value = "4MB", value_name = "SIZE", value_parser = parse_chunk_size)]
    pub chunk_size: u64,

    /// ozone.client.bytes.per.checksum: one checksum per this many bytes of a chunk.
    #[arg(long, default_value = "16KB", value_name = "SIZE", value_parser = parse_bytes_per_checksum)]
    pub bytes_per_checksum: u64,

    /// ozone.client.checksum.type: CRC32, CRC32C, SHA256, MD5 or NONE.
    #[arg(long, default_value = "CRC32", value_name = "TYPE", value_parser = parse_checksum_type)]
    pub checksum: ChecksumType,

    /// Block size, ozone.scm.block.size: a new block (local ID) after this many bytes.
    #[arg(long, default_value = "256MB", value_name = "SIZE", value_parser = parse_positive_size)]
    pub block_size: u64,

    /// PutBlock every this many bytes (ozone.client.stream.buffer.flush.size) and at block end.
    #[arg(long, default_value = "16MB", value_name = "SIZE", value_parser = parse_positive_size)]
    pub flush_size: u64,

    /// incremental: checksum each write() as it is copied into the chunk buffer (HDDS-15612's
    /// "after"); at-flush: checksum the whole chunk when it is sent (Ozone before the patch).
    #[arg(long, default_value = "incremental", value_name = "MODE", value_parser = parse_mode)]
    pub checksum_mode: ChecksumMode,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadVersion {
    /// One `data` buffer.
    V0,
    /// `dataBuffers` split at bytesPerChecksum (what the Java client sends).
    V1,
}

#[derive(Args, Debug, Clone)]
pub struct WriteArgs {
    #[command(flatten)]
    pub conn: ConnArgs,

    #[command(flatten)]
    pub shape: ShapeArgs,

    #[command(flatten)]
    pub report: ReportArgs,

    /// Record every block written (container, local ID, chunks, checksums) in FILE (JSON lines)
    /// for a later `loadgen read --manifest FILE`.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,

    /// After writing, read every block back (GetBlock, ReadChunk) and verify every checksum.
    #[arg(long)]
    pub then_read: bool,

    /// ReadChunk version of the read-back.
    #[arg(long, value_enum, default_value = "v1")]
    pub read_version: ReadVersion,
}

#[derive(Args, Debug, Clone)]
pub struct ReadArgs {
    #[command(flatten)]
    pub conn: ConnArgs,

    /// The data set to write first when there is no --manifest.
    #[command(flatten)]
    pub shape: ShapeArgs,

    #[command(flatten)]
    pub report: ReportArgs,

    /// Read the blocks listed in FILE (written by `loadgen write --manifest FILE`) instead of
    /// writing a data set first.
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,

    /// Verify every chunk's checksums (mismatches are data-integrity errors).
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub verify: bool,

    /// ReadChunk version.
    #[arg(long, value_enum, default_value = "v1")]
    pub read_version: ReadVersion,
}

const MAX: u64 = common::MAX_MESSAGE_SIZE as u64;

fn size(s: &str) -> Result<u64, String> {
    common::units::parse_size(s).map_err(|e| e.to_string())
}

fn parse_positive_size(s: &str) -> Result<u64, String> {
    match size(s)? {
        0 => Err("must be greater than zero".into()),
        n => Ok(n),
    }
}

fn parse_upto_32mb(s: &str) -> Result<u64, String> {
    let n = parse_positive_size(s)?;
    if n > MAX {
        return Err(format!("{n} bytes exceeds the 32 MB message limit"));
    }
    Ok(n)
}

fn parse_write_size(s: &str) -> Result<u64, String> {
    parse_upto_32mb(s)
}

fn parse_chunk_size(s: &str) -> Result<u64, String> {
    parse_upto_32mb(s)
}

fn parse_bytes_per_checksum(s: &str) -> Result<u64, String> {
    let n = parse_positive_size(s)?;
    u32::try_from(n).map_err(|_| format!("{n} bytes is too large"))?;
    Ok(n)
}

pub fn parse_checksum_type(s: &str) -> Result<ChecksumType, String> {
    match s.to_ascii_uppercase().as_str() {
        "CRC32" => Ok(ChecksumType::Crc32),
        "CRC32C" => Ok(ChecksumType::Crc32c),
        "SHA256" => Ok(ChecksumType::Sha256),
        "MD5" => Ok(ChecksumType::Md5),
        "NONE" => Ok(ChecksumType::None),
        _ => Err(format!(
            "'{s}' is not one of CRC32, CRC32C, SHA256, MD5, NONE"
        )),
    }
}

fn parse_mode(s: &str) -> Result<ChecksumMode, String> {
    s.parse()
}

/// The name Ozone uses for a checksum type (`CRC32`).
pub fn checksum_name(t: ChecksumType) -> &'static str {
    match t {
        ChecksumType::None => "NONE",
        ChecksumType::Crc32 => "CRC32",
        ChecksumType::Crc32c => "CRC32C",
        ChecksumType::Sha256 => "SHA256",
        ChecksumType::Md5 => "MD5",
    }
}

pub fn mode_name(m: ChecksumMode) -> &'static str {
    match m {
        ChecksumMode::Incremental => "incremental",
        ChecksumMode::AtFlush => "at-flush",
    }
}
