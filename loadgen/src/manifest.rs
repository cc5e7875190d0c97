//! The block manifest `loadgen write --manifest FILE` records and `loadgen read --manifest FILE`
//! reads: JSON lines. The first line describes the run that wrote the blocks, every further line
//! is one block as its final PutBlock committed it:
//!
//! ```text
//! {"manifest":"loadgen-blocks/1","write":{"write_size":1048576,"chunk_size":4194304,...}}
//! {"container_id":1,"local_id":281474976710656,"size":8388608,"chunks":[{"name":"..._chunk_1","offset":0,"len":4194304,"checksum_type":"CRC32","bytes_per_checksum":16384,"checksums":["1c291ca3",...]},...]}
//! ```
//!
//! Checksums are hex strings of the stored bytes (CRC32/CRC32C: 4 bytes big-endian).

use crate::workload::block::BlockSink;
use crate::workload::block_writer::{checksum_name, checksum_type_of as parse_checksum_type};
use bytes::Bytes;
use common::proto::{BlockData, ChecksumData, ChunkInfo, DatanodeBlockId};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

pub const FORMAT: &str = "loadgen-blocks/1";

#[derive(Serialize, Deserialize)]
struct Header {
    manifest: String,
    #[serde(default)]
    write: serde_json::Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ManifestChunk {
    pub name: String,
    pub offset: u64,
    pub len: u64,
    pub checksum_type: String,
    pub bytes_per_checksum: u32,
    pub checksums: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ManifestBlock {
    pub container_id: i64,
    pub local_id: i64,
    pub size: u64,
    pub chunks: Vec<ManifestChunk>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Result<Bytes, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("'{s}' is not hex"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("'{s}' is not hex")))
        .collect::<Result<Vec<u8>, _>>()
        .map(Bytes::from)
}

impl ManifestBlock {
    pub fn from_block(b: &BlockData) -> Self {
        let chunks = b
            .chunks
            .iter()
            .map(|c| ManifestChunk {
                name: c.chunk_name.clone(),
                offset: c.offset,
                len: c.len,
                checksum_type: common::proto::ChecksumType::try_from(c.checksum_data.r#type)
                    .map_or_else(
                        |_| c.checksum_data.r#type.to_string(),
                        |t| checksum_name(t).to_string(),
                    ),
                bytes_per_checksum: c.checksum_data.bytes_per_checksum,
                checksums: c.checksum_data.checksums.iter().map(|x| hex(x)).collect(),
            })
            .collect();
        Self {
            container_id: b.block_id.container_id,
            local_id: b.block_id.local_id,
            size: b.chunks.iter().map(|c| c.len).sum(),
            chunks,
        }
    }

    pub fn block_id(&self) -> DatanodeBlockId {
        DatanodeBlockId {
            container_id: self.container_id,
            local_id: self.local_id,
            ..Default::default()
        }
    }

    /// The chunks as the protocol's ChunkInfo.
    pub fn chunk_infos(&self) -> Result<Vec<ChunkInfo>, String> {
        self.chunks
            .iter()
            .map(|c| {
                let kind = parse_checksum_type(&c.checksum_type)?;
                Ok(ChunkInfo {
                    chunk_name: c.name.clone(),
                    offset: c.offset,
                    len: c.len,
                    checksum_data: ChecksumData {
                        r#type: kind as i32,
                        bytes_per_checksum: c.bytes_per_checksum,
                        checksums: c
                            .checksums
                            .iter()
                            .map(|h| unhex(h))
                            .collect::<Result<_, _>>()?,
                    },
                    ..Default::default()
                })
            })
            .collect()
    }
}

/// Creates the manifest file at `path` with its header line (the configuration `write`).
fn create_with_header(
    path: &Path,
    write: serde_json::Value,
) -> std::io::Result<std::io::BufWriter<std::fs::File>> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let header = Header {
        manifest: FORMAT.to_string(),
        write,
    };
    serde_json::to_writer(&mut out, &header)?;
    out.write_all(b"\n")?;
    Ok(out)
}

/// A manifest being written: the header at once, then each block as it is committed (nothing
/// is kept in memory). Each line reaches the file with one `write(2)` as soon as its PutBlock
/// was acknowledged, not through a buffer: if loadgen itself is killed, the manifest still holds
/// every block committed before, in whole lines (the crash tests rely on it). The first write
/// error is kept and reported at the end.
pub struct ManifestWriter {
    out: Mutex<ManifestOut>,
}

struct ManifestOut {
    file: std::fs::File,
    /// The line being written, reused.
    line: Vec<u8>,
    error: Option<std::io::Error>,
}

impl ManifestWriter {
    pub fn create(path: &Path, write: serde_json::Value) -> std::io::Result<Self> {
        let file = create_with_header(path, write)?
            .into_inner()
            .map_err(|e| e.into_error())?;
        Ok(ManifestWriter {
            out: Mutex::new(ManifestOut {
                file,
                line: Vec::with_capacity(4096),
                error: None,
            }),
        })
    }

    /// The first error of the run, if any.
    pub fn finish(&self) -> std::io::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        match out.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl BlockSink for ManifestWriter {
    fn committed(&self, block: &BlockData) {
        let entry = ManifestBlock::from_block(block);
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let ManifestOut { file, line, error } = &mut *out;
        if error.is_some() {
            return;
        }
        line.clear();
        let result = serde_json::to_writer(&mut *line, &entry)
            .map_err(std::io::Error::from)
            .and_then(|()| {
                line.push(b'\n');
                file.write_all(line)
            });
        if let Err(e) = result {
            *error = Some(e);
        }
    }
}

/// Writes the manifest of `blocks`, written with the configuration `write`.
pub fn write(
    path: &Path,
    write: serde_json::Value,
    blocks: &[ManifestBlock],
) -> std::io::Result<()> {
    let mut out = create_with_header(path, write)?;
    for b in blocks {
        serde_json::to_writer(&mut out, b)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Reads a manifest; errors name the file and line.
pub fn read(path: &Path) -> Result<Vec<ManifestBlock>, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("--manifest {}: {e}", path.display()))?;
    let mut blocks = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("--manifest {}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |e: String| format!("--manifest {} line {}: {e}", path.display(), i + 1);
        if i == 0 {
            let h: Header = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
            if h.manifest != FORMAT {
                return Err(bad(format!("format '{}' is not {FORMAT}", h.manifest)));
            }
            continue;
        }
        let b: ManifestBlock = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        b.chunk_infos().map_err(bad)?;
        blocks.push(b);
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::proto::ChecksumType;

    #[test]
    fn blocks_round_trip_through_a_file() {
        let data = vec![7u8; 40_000];
        let chunk = ChunkInfo {
            chunk_name: "5_chunk_1".into(),
            offset: 0,
            len: data.len() as u64,
            checksum_data: common::checksum::compute(ChecksumType::Crc32c, 16384, &data).unwrap(),
            ..Default::default()
        };
        let block = BlockData {
            block_id: DatanodeBlockId {
                container_id: 3,
                local_id: 5,
                ..Default::default()
            },
            chunks: vec![chunk.clone()],
            ..Default::default()
        };
        let m = ManifestBlock::from_block(&block);
        let dir = std::env::temp_dir().join(format!("manifest-test-{}", std::process::id()));
        write(&dir, serde_json::json!({"x": 1}), std::slice::from_ref(&m)).unwrap();
        let back = read(&dir).unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(back, vec![m]);
        assert_eq!(back[0].size, 40_000);
        assert_eq!(back[0].chunk_infos().unwrap(), vec![chunk]);
    }
}
