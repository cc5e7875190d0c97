//! `KeyValueHandler`: one function per command type turning a request into a response with the
//! [`ContainerStore`], and, in [`KeyValueHandler::handle`], the steps `HddsDispatcher` runs around
//! the handler (shared/ozone/protocol.md §4 steps 4–8): find or auto-create the container, refuse
//! writes on a full store, route by `cmdType`, and mark the container UNHEALTHY after a failed
//! write. Echo stays in [`crate::dispatcher`]; every other type comes here.
//!
//! Per type, a payload that does not match `cmdType` (e.g. WriteChunk without `writeChunk`) is
//! MALFORMED_REQUEST "Cmd type does not match the payload.", as in the DataNode.

use crate::dispatcher::{NodeIdentity, envelope, error};
use crate::store::{
    Container, ContainerStore, PutBlock, StoreError, StoreResult, concat, read_piece_size,
};
use bytes::Bytes;
use common::proto::container_data_proto::State;
use common::proto::read_chunk_response_proto::ResponseData;
use common::proto::{
    BlockData, ContainerCommandRequestProto as Request, ContainerCommandResponseProto as Response,
    DataBuffers, FinalizeBlockResponseProto, GetBlockResponseProto,
    GetCommittedBlockLengthResponseProto, GetSmallFileResponseProto, ListBlockResponseProto,
    PutBlockResponseProto, PutSmallFileResponseProto, ReadChunkResponseProto, ReadChunkVersion,
    ReadContainerResponseProto, Result as OzoneResult, Type, WriteChunkResponseProto,
};
use std::sync::Arc;

pub struct KeyValueHandler {
    store: Arc<ContainerStore>,
    node: NodeIdentity,
}

impl KeyValueHandler {
    pub fn new(store: Arc<ContainerStore>, node: NodeIdentity) -> Self {
        Self { store, node }
    }

    pub fn node(&self) -> &NodeIdentity {
        &self.node
    }

    pub fn store(&self) -> &Arc<ContainerStore> {
        &self.store
    }

    /// Serves one request of any type but Echo, in the DataNode's order of checks.
    pub async fn handle(&self, cmd: Type, mut req: Request) -> Response {
        if cmd == Type::CreateContainer {
            return self.create_container(&mut req);
        }
        // Steps 4–5: the container, auto-created for WriteChunk, PutBlock and PutSmallFile
        // unless `containerAutoCreate` is false; else CONTAINER_NOT_FOUND.
        let container = match self.container_for(cmd, &req) {
            Ok(c) => c,
            Err(e) => return fail(&mut req, e),
        };
        // Step 6: a full volume refuses data writes to an OPEN container before the handler.
        if matches!(cmd, Type::WriteChunk | Type::PutBlock | Type::PutSmallFile)
            && container.state() == State::Open
            && self.store.is_full()
        {
            let msg = format!(
                "Container {}: dn-sim's {} store is full: {} of {} bytes used (--capacity)",
                container.id(),
                self.store.kind(),
                self.store.used(),
                self.store.capacity()
            );
            return error(&mut req, OzoneResult::DiskOutOfSpace, msg);
        }
        let c = &container;
        let r = &mut req;
        let resp = match cmd {
            Type::ReadContainer => self.read_container(c, r),
            Type::CloseContainer => self.close_container(c, r),
            Type::PutBlock => self.put_block(c, r).await,
            Type::GetBlock => self.get_block(c, r).await,
            Type::GetCommittedBlockLength => self.get_committed_block_length(c, r).await,
            Type::ListBlock => self.list_block(c, r).await,
            Type::FinalizeBlock => self.finalize_block(c, r).await,
            Type::WriteChunk => self.write_chunk(c, r).await,
            Type::ReadChunk => self.read_chunk(c, r).await,
            Type::PutSmallFile => self.put_small_file(c, r).await,
            Type::GetSmallFile => self.get_small_file(c, r).await,
            Type::DeleteBlock | Type::DeleteChunk => delete(r),
            other => unsupported(other, r),
        };
        // Step 8: a failed write marks the container UNHEALTHY; later writes then answer
        // CONTAINER_UNHEALTHY (reads still work).
        if !is_read_only(cmd) && marks_unhealthy(resp.result) && container.mark_unhealthy() {
            tracing::info!(
                container = container.id(),
                cmd = cmd.as_str_name(),
                result = resp.result,
                "marked container UNHEALTHY after a failed write"
            );
        }
        resp
    }

    fn container_for(&self, cmd: Type, req: &Request) -> StoreResult<Arc<Container>> {
        if let Some(c) = self.store.get(req.container_id) {
            return Ok(c);
        }
        // Only writes auto-create, unless `containerAutoCreate` is false; a payload-less write
        // creates the container too, and is then answered MALFORMED_REQUEST.
        let auto_create = match cmd {
            Type::WriteChunk => req
                .write_chunk
                .as_ref()
                .and_then(|w| w.container_auto_create),
            Type::PutBlock => req.put_block.as_ref().and_then(|p| p.container_auto_create),
            // PutSmallFile carries its PutBlock, and with it the flag.
            Type::PutSmallFile => req
                .put_small_file
                .as_ref()
                .and_then(|p| p.block.container_auto_create),
            _ => Some(false),
        }
        .unwrap_or(true);
        if auto_create {
            Ok(self.store.get_or_create(req.container_id))
        } else {
            self.store.lookup(req.container_id)
        }
    }

    /// CreateContainer: OPEN (or the requested `state`); CONTAINER_ALREADY_EXISTS if present.
    pub fn create_container(&self, req: &mut Request) -> Response {
        let Some(create) = req.create_container.take() else {
            return malformed(req);
        };
        let state = create
            .state
            .and_then(|s| State::try_from(s).ok())
            .unwrap_or(State::Open);
        let result = self.store.create(req.container_id, state);
        respond(req, result, |resp, _| {
            resp.message = Some(String::new()); // the DataNode's getSuccessResponse sets ""
            resp.create_container = Some(Default::default());
        })
    }

    /// ReadContainer: the container's `ContainerDataProto`.
    pub fn read_container(&self, c: &Container, req: &mut Request) -> Response {
        if req.read_container.take().is_none() {
            return malformed(req);
        }
        let mut resp = envelope(req, OzoneResult::Success);
        resp.read_container = Some(ReadContainerResponseProto {
            container_data: Some(c.data()),
        });
        resp
    }

    /// CloseContainer: to CLOSED (idempotent); CONTAINER_UNHEALTHY for an unhealthy container.
    pub fn close_container(&self, c: &Container, req: &mut Request) -> Response {
        if req.close_container.take().is_none() {
            return malformed(req);
        }
        respond(req, c.close(), |resp, ()| {
            resp.message = Some(String::new()); // the DataNode's getSuccessResponse sets ""
            resp.close_container = Some(Default::default());
        })
    }

    /// PutBlock: `eof` absent means true; `size` ≠ the chunk lengths' sum is MALFORMED_REQUEST;
    /// answers `committedBlockLength`.
    pub async fn put_block(&self, c: &Container, req: &mut Request) -> Response {
        let Some(put) = req.put_block.take() else {
            return malformed(req);
        };
        let result = async {
            c.check_open()?;
            let put = PutBlock::new(put.block_data, put.eof.unwrap_or(true))?;
            c.put_block(put).await
        }
        .await;
        respond(req, result, |resp, block| {
            resp.put_block = Some(PutBlockResponseProto {
                committed_block_length: committed_length(&block),
            });
        })
    }

    /// GetBlock: the stored `BlockData`; NO_SUCH_BLOCK, UNKNOWN_BCSID, BCSID_MISMATCH.
    pub async fn get_block(&self, c: &Container, req: &mut Request) -> Response {
        let Some(get) = req.get_block.take() else {
            return malformed(req);
        };
        let result = c.get_block(&get.block_id).await;
        respond(req, result, |resp, block_data| {
            resp.get_block = Some(GetBlockResponseProto {
                block_data,
                short_circuit_access_granted: None,
            });
        })
    }

    /// GetCommittedBlockLength: the stored size of the block named in the request.
    pub async fn get_committed_block_length(&self, c: &Container, req: &mut Request) -> Response {
        let Some(get) = req.get_committed_block_length.take() else {
            return malformed(req);
        };
        let result = c.committed_length(&get.block_id).await;
        respond(req, result, |resp, block_length| {
            resp.get_committed_block_length = Some(GetCommittedBlockLengthResponseProto {
                block_id: get.block_id,
                block_length,
            });
        })
    }

    /// ListBlock: up to `count` committed blocks from `startLocalID` on.
    pub async fn list_block(&self, c: &Container, req: &mut Request) -> Response {
        let Some(list) = req.list_block.take() else {
            return malformed(req);
        };
        let result = c.list_blocks(list.start_local_id, list.count).await;
        respond(req, result, |resp, block_data| {
            resp.list_block = Some(ListBlockResponseProto { block_data });
        })
    }

    /// FinalizeBlock: the block's `BlockData`.
    pub async fn finalize_block(&self, c: &Container, req: &mut Request) -> Response {
        let Some(finalize) = req.finalize_block.take() else {
            return malformed(req);
        };
        let result = c.finalize_block(&finalize.block_id).await;
        respond(req, result, |resp, block_data| {
            resp.finalize_block = Some(FinalizeBlockResponseProto { block_data });
        })
    }

    /// WriteChunk, with or without a piggybacked PutBlock (`block`, whose absent `eof` means
    /// false, as `getEof()` reads it). The response's `writeChunk` is always set; it carries
    /// `committedBlockLength` only with a piggybacked PutBlock.
    pub async fn write_chunk(&self, c: &Container, req: &mut Request) -> Response {
        let Some(write) = req.write_chunk.take() else {
            return malformed(req);
        };
        let result = async {
            c.check_open()?;
            // An absent chunkData reads as the default ChunkInfo in Java: len 0, a no-op write.
            let chunk = write.chunk_data.unwrap_or_default();
            let data = write.data.unwrap_or_default();
            match write.block {
                Some(put) => {
                    // Checked before the write, so a malformed PutBlock stores nothing.
                    let put = PutBlock::new(put.block_data, put.eof.unwrap_or(false))?;
                    c.write_chunk_and_put(&write.block_id, &chunk, data, put)
                        .await
                        .map(Some)
                }
                None => c
                    .write_chunk(&write.block_id, &chunk, data)
                    .await
                    .map(|()| None),
            }
        }
        .await;
        respond(req, result, |resp, put: Option<BlockData>| {
            resp.write_chunk = Some(WriteChunkResponseProto {
                committed_block_length: put.as_ref().map(committed_length),
            });
        })
    }

    /// ReadChunk, V0 (one `data`) or V1 (`dataBuffers` cut at `bytesPerChecksum`).
    pub async fn read_chunk(&self, c: &Container, req: &mut Request) -> Response {
        let Some(read) = req.read_chunk.take() else {
            return malformed(req);
        };
        let v1 = read.read_chunk_version == Some(ReadChunkVersion::V1 as i32);
        let chunk = read.chunk_data;
        let piece = read_piece_size(&chunk.checksum_data, chunk.len, v1);
        let result = c
            .read_chunk(&read.block_id, chunk.offset, chunk.len, piece)
            .await;
        respond(req, result, |resp, buffers| {
            resp.read_chunk = Some(ReadChunkResponseProto {
                block_id: read.block_id,
                chunk_data: chunk,
                response_data: Some(response_data(buffers, v1)),
            });
        })
    }

    /// PutSmallFile: a write of the one chunk and an end-of-block PutBlock whose chunk list is
    /// that chunk, in one call.
    pub async fn put_small_file(&self, c: &Container, req: &mut Request) -> Response {
        let Some(small) = req.put_small_file.take() else {
            return malformed(req);
        };
        let result = async {
            c.check_open()?;
            // The request's BlockData is checked as sent, then its chunks become the one chunk.
            let mut block = PutBlock::new(small.block.block_data, true)?.block().clone();
            block.chunks = vec![small.chunk_info.clone()];
            block.size = None;
            let put = PutBlock::new(block, true)?;
            let block_id = put.block().block_id;
            c.write_chunk_and_put(&block_id, &small.chunk_info, small.data, put)
                .await
        }
        .await;
        respond(req, result, |resp, block| {
            resp.put_small_file = Some(PutSmallFileResponseProto {
                committed_block_length: committed_length(&block),
            });
        })
    }

    /// GetSmallFile: GetBlock and the data of all its chunks; `chunkData` is the last chunk.
    pub async fn get_small_file(&self, c: &Container, req: &mut Request) -> Response {
        let Some(small) = req.get_small_file.take() else {
            return malformed(req);
        };
        let v1 = small.read_chunk_version == Some(ReadChunkVersion::V1 as i32);
        let result = c
            .read_block(&small.block.block_id, v1)
            .await
            .and_then(|(block, buffers)| match block.chunks.last() {
                Some(chunk) => Ok((chunk.clone(), buffers)),
                // The DataNode builds the answer from a null ChunkInfo and fails.
                None => Err(StoreError::new(
                    OzoneResult::ContainerInternalError,
                    "java.lang.NullPointerException: GetSmallFile of a block without chunks",
                )),
            });
        respond(req, result, |resp, (chunk_data, buffers)| {
            resp.get_small_file = Some(GetSmallFileResponseProto {
                data: ReadChunkResponseProto {
                    block_id: small.block.block_id,
                    chunk_data,
                    response_data: Some(response_data(buffers, v1)),
                },
            });
        })
    }
}

/// Read-only types (`HddsUtils.isReadOnly`; Echo is handled elsewhere).
fn is_read_only(cmd: Type) -> bool {
    matches!(
        cmd,
        Type::ReadContainer
            | Type::ReadChunk
            | Type::ReadBlock
            | Type::ListBlock
            | Type::GetBlock
            | Type::GetSmallFile
            | Type::ListContainer
            | Type::ListChunk
            | Type::GetCommittedBlockLength
            | Type::GetContainerChecksumInfo
    )
}

/// Whether a failed write's result marks the container UNHEALTHY (`canIgnoreException`).
/// DISK_OUT_OF_SPACE does not: the DataNode answers it from its volume check before the handler
/// runs, and dn-sim's capacity check inside a write stands for that check.
fn marks_unhealthy(result: i32) -> bool {
    !matches!(
        OzoneResult::try_from(result),
        Ok(OzoneResult::Success
            | OzoneResult::ContainerUnhealthy
            | OzoneResult::ClosedContainerIo
            | OzoneResult::DeleteOnOpenContainer
            | OzoneResult::UnsupportedRequest
            | OzoneResult::MalformedRequest
            | OzoneResult::ContainerMissing
            | OzoneResult::ContainerAlreadyExists
            | OzoneResult::DiskOutOfSpace)
    )
}

/// The answer: success with `fill` applied, or the store's error.
fn respond<T>(
    req: &mut Request,
    result: StoreResult<T>,
    fill: impl FnOnce(&mut Response, T),
) -> Response {
    match result {
        Ok(value) => {
            let mut resp = envelope(req, OzoneResult::Success);
            fill(&mut resp, value);
            resp
        }
        Err(e) => fail(req, e),
    }
}

fn fail(req: &mut Request, e: StoreError) -> Response {
    error(req, e.result, e.message)
}

/// `ContainerCommandResponseBuilders.malformedRequest`.
fn malformed(req: &mut Request) -> Response {
    let msg = "Cmd type does not match the payload.".to_string();
    error(req, OzoneResult::MalformedRequest, msg)
}

/// ListContainer, ListChunk and CompactChunk are unsupported in the DataNode too; the other
/// types dn-sim does not simulate (UpdateContainer, DeleteContainer, the Stream* types,
/// GetContainerChecksumInfo, ReadBlock) answer the same code and say so.
fn unsupported(cmd: Type, req: &mut Request) -> Response {
    let msg = match cmd {
        Type::ListContainer | Type::ListChunk | Type::CompactChunk => {
            "Server does not support this command yet.".to_string()
        }
        other => format!("{} is not simulated by dn-sim", other.as_str_name()),
    };
    error(req, OzoneResult::UnsupportedRequest, msg)
}

/// DeleteBlock and DeleteChunk (deprecated): the DataNode throws UnsupportedOperationException,
/// which its handler answers as CONTAINER_INTERNAL_ERROR.
fn delete(req: &mut Request) -> Response {
    let what = if req.cmd_type == Type::DeleteBlock as i32 {
        "block"
    } else {
        "chunk"
    };
    let msg = format!(
        "java.lang.UnsupportedOperationException: Datanode handles {what} deletion using \
         BlockDeletingService"
    );
    error(req, OzoneResult::ContainerInternalError, msg)
}

fn committed_length(block: &BlockData) -> GetCommittedBlockLengthResponseProto {
    GetCommittedBlockLengthResponseProto {
        block_id: block.block_id,
        block_length: block.size.unwrap_or(0),
    }
}

/// V0: one `data` (joined without copying when it is one piece); V1: `dataBuffers`.
fn response_data(buffers: Vec<Bytes>, v1: bool) -> ResponseData {
    if v1 {
        ResponseData::DataBuffers(DataBuffers { buffers })
    } else {
        ResponseData::Data(concat(buffers))
    }
}
