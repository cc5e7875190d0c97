//! `KeyValueHandler`: one function per command type turning a request into a response with the
//! [`ContainerStore`], and, in [`KeyValueHandler::handle`], the steps `HddsDispatcher` runs around
//! the handler (`HddsDispatcher.dispatchRequest`): find or auto-create the container, refuse
//! writes on a full store, route by `cmdType`, and mark the container UNHEALTHY after a failed
//! write. Echo stays in [`crate::datanode::dispatcher`]; every other type comes here.
//!
//! Per type, a payload that does not match `cmdType` (e.g. WriteChunk without `writeChunk`) is
//! MALFORMED_REQUEST "Cmd type does not match the payload.", as in the DataNode.
//!
//! Where releases differ the handler asks `self.node.version`: PutBlock size mismatches, the results that mark a container UNHEALTHY,
//! the command types a release knows, ReadContainer's `bytesUsed`.
//!
//! A few outcomes are a gRPC status rather than a response, as in the DataNode: a failed write on
//! a container that is not OPEN, CLOSING or RECOVERING (its `Preconditions.checkState` throws),
//! a failed CreateContainer of a new container, 2.0's audit of a PutBlock whose size does not
//! match, and command types the release does not define.

use crate::datanode::envelope::{envelope, error};
use crate::datanode::payload::PayloadSource;
use crate::datanode::store::{
    Container, ContainerStore, PutBlock, StoreError, StoreResult, concat, read_piece_size,
};
use crate::datanode::timer::ServiceClock;
use crate::datanode::version::OzoneVersion;
use bytes::Bytes;
use common::proto::container_data_proto::State;
use common::proto::read_chunk_response_proto::ResponseData;
use common::proto::{
    BlockData, ContainerCommandRequestProto as Request, ContainerCommandResponseProto as Response,
    DataBuffers, EchoResponseProto, FinalizeBlockResponseProto, GetBlockResponseProto,
    GetCommittedBlockLengthResponseProto, GetSmallFileResponseProto, ListBlockResponseProto,
    PutBlockResponseProto, PutSmallFileResponseProto, ReadBlockResponseProto,
    ReadChunkResponseProto, ReadChunkVersion, ReadContainerResponseProto, Result as OzoneResult,
    Type, WriteChunkResponseProto,
};
use prost::Message;
use std::sync::Arc;
use std::time::Duration;
use tonic::Status;

/// Who the simulated DataNode is: its UUID and the Ozone release it answers as.
#[derive(Clone, Debug)]
pub struct NodeIdentity {
    pub datanode_uuid: String,
    pub version: crate::datanode::version::OzoneVersion,
}

/// What the front end tells the DataNode of a request besides the request itself (Ozone's
/// `DispatcherContext`): on the Ratis port, the log index of its transaction.
#[derive(Clone, Copy, Debug, Default)]
pub struct DispatcherContext {
    /// The Raft log index of a write applied as a transaction; `None` on the gRPC port.
    pub log_index: Option<u64>,
}

/// The UUID dn-sim answers with unless told otherwise (`--datanode-uuid`).
pub const DEFAULT_DATANODE_UUID: &str = "00000000-0000-4000-8000-00000000d5d5";

impl Default for NodeIdentity {
    fn default() -> Self {
        Self {
            datanode_uuid: DEFAULT_DATANODE_UUID.to_string(),
            version: Default::default(),
        }
    }
}

pub struct KeyValueHandler {
    store: Arc<ContainerStore>,
    node: NodeIdentity,
    /// Echo's answer payloads, sliced from buffers filled once.
    payloads: PayloadSource,
}

impl KeyValueHandler {
    pub fn new(store: Arc<ContainerStore>, node: NodeIdentity) -> Self {
        store.set_version(node.version);
        Self {
            store,
            node,
            payloads: PayloadSource::new(),
        }
    }

    pub fn node(&self) -> &NodeIdentity {
        &self.node
    }

    pub fn store(&self) -> &Arc<ContainerStore> {
        &self.store
    }

    /// `KeyValueHandler.handleEcho`: sleep `sleepTimeMs` on the handler, answer `payloadSizeResp`
    /// bytes of random data; the request payload is ignored. An absent `echo` is the default
    /// request (an empty payload). Echo is a write unless `readOnly` is true, so a failure
    /// (a negative size) marks the container UNHEALTHY, or fails the call (gRPC UNKNOWN) when the
    /// container is not OPEN, CLOSING or RECOVERING.
    pub async fn echo(
        &self,
        mut req: Request,
        clock: &mut ServiceClock,
    ) -> Result<Response, Status> {
        let container = match self.store.lookup(req.container_id) {
            Ok(c) => c,
            Err(e) => return Ok(error(&mut req, e.result, e.message)),
        };
        let echo = req.echo.take().unwrap_or_default();
        let write = echo.read_only != Some(true);
        if let Some(resp) = self.check_node(&container, &mut req) {
            return self.after_handler(write, &container, resp).await;
        }
        if let Some(ms) = echo.sleep_time_ms.filter(|&ms| ms > 0) {
            // The DataNode sleeps on its worker thread: the handler stays busy.
            clock.hold(Duration::from_millis(ms as u64)).await;
        }
        let size = echo.payload_size_resp.unwrap_or(0);
        if size < 0 {
            // commons-lang's `RandomUtils.nextBytes` / `randomBytes` refuses a negative count
            // (after the sleep); the handler answers the RuntimeException.
            let msg = "java.lang.IllegalArgumentException: Count cannot be negative.".to_string();
            let resp = error(&mut req, OzoneResult::ContainerInternalError, msg);
            return self.after_handler(write, &container, resp).await;
        }
        let size = size as usize;
        if size > common::MAX_MESSAGE_SIZE {
            // A real DN would build the response and the client would refuse it as too large.
            return Err(Status::resource_exhausted(format!(
                "gRPC message exceeds maximum size {}: {size}",
                common::MAX_MESSAGE_SIZE
            )));
        }
        let mut resp = envelope(&mut req, OzoneResult::Success);
        resp.echo = Some(EchoResponseProto {
            payload: Some(self.payloads.slice(size)),
        });
        Ok(resp)
    }

    /// Serves one request of any type but Echo, in the DataNode's order of checks. `Err` is a
    /// gRPC status that fails the call (see the module notes).
    pub async fn handle(
        &self,
        cmd: Type,
        mut req: Request,
        context: DispatcherContext,
    ) -> Result<Response, Status> {
        let version = self.node.version;
        match cmd {
            // Types the release does not define fail to parse there (gRPC UNKNOWN).
            Type::GetContainerChecksumInfo if !version.at_least(OzoneVersion::V2_1) => {
                return Err(unparsable(version));
            }
            Type::ReadBlock if !version.at_least(OzoneVersion::V2_2) => {
                return Err(unparsable(version));
            }
            // ReadBlock bypasses KeyValueHandler.handle: no node check, nothing marked.
            Type::ReadBlock => return Ok(self.read_block(&mut req).await),
            Type::CreateContainer => return self.create_container(&mut req).await,
            _ => {}
        }
        // Steps 4–5: the container, auto-created for WriteChunk, PutBlock, PutSmallFile and
        // StreamInit (always: no release has `containerAutoCreate`); else CONTAINER_NOT_FOUND.
        let container = match self.container_for(cmd, &req).await {
            Ok(c) => c,
            Err(e) => return Ok(fail(&mut req, e)),
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
            return Ok(error(&mut req, OzoneResult::DiskOutOfSpace, msg));
        }
        let write = !is_read_only(cmd);
        if let Some(resp) = self.check_node(&container, &mut req) {
            return self.after_handler(write, &container, resp).await;
        }
        // 2.0's FAILURE audit re-parses a PutBlock's BlockData and throws on a size mismatch.
        let audit_throws = version == OzoneVersion::V2_0 && bad_block_size(cmd, &req);
        let c = &container;
        let r = &mut req;
        let resp = match cmd {
            Type::ReadContainer => self.read_container(c, r),
            Type::UpdateContainer => self.update_container(c, r).await,
            Type::DeleteContainer => self.delete_container(c, r).await,
            Type::CloseContainer => self.close_container(c, r).await,
            Type::GetContainerChecksumInfo => self.checksum_info(c, r).await,
            Type::PutBlock => self.put_block(c, r, context).await,
            Type::GetBlock => self.get_block(c, r).await,
            Type::GetCommittedBlockLength => self.get_committed_block_length(c, r).await,
            Type::ListBlock => self.list_block(c, r).await,
            Type::FinalizeBlock => self.finalize_block(c, r).await,
            Type::WriteChunk => self.write_chunk(c, r).await,
            Type::ReadChunk => self.read_chunk(c, r).await,
            Type::PutSmallFile => self.put_small_file(c, r, context).await,
            Type::GetSmallFile => self.get_small_file(c, r).await,
            Type::DeleteBlock | Type::DeleteChunk => delete(r),
            other => unsupported(other, r),
        };
        let resp = self.after_handler(write, &container, resp).await?;
        if audit_throws && resp.result != OzoneResult::Success as i32 {
            return Err(Status::new(tonic::Code::Unknown, ""));
        }
        Ok(resp)
    }

    /// `HddsDispatcher` after the handler (step 8): a failed write whose result is not ignorable
    /// marks an OPEN, CLOSING or RECOVERING container UNHEALTHY (later writes then answer
    /// CONTAINER_UNHEALTHY; reads still work); in any other state the DataNode's
    /// `Preconditions.checkState` throws and the call fails with gRPC UNKNOWN, no description.
    pub async fn after_handler(
        &self,
        write: bool,
        container: &Arc<Container>,
        resp: Response,
    ) -> Result<Response, Status> {
        if !write || !marks_unhealthy(self.node.version, resp.result) {
            return Ok(resp);
        }
        match container.state() {
            State::Open | State::Closing | State::Recovering => {
                if container.on_disk(|c| c.mark_unhealthy()).await {
                    tracing::info!(
                        container = container.id(),
                        cmd = resp.cmd_type,
                        result = resp.result,
                        "marked container UNHEALTHY after a failed write"
                    );
                }
                Ok(resp)
            }
            _ => Err(Status::new(tonic::Code::Unknown, "")),
        }
    }

    /// The EC check `KeyValueHandler.handle` runs for every type before its switch: a request
    /// to an EC replica (replicaIndex > 0) must name this DataNode exactly.
    pub fn check_node(&self, container: &Container, req: &mut Request) -> Option<Response> {
        if container.replica_index() > 0 && req.datanode_uuid != self.node.datanode_uuid {
            let msg = wrong_node(&req.datanode_uuid, &self.node.datanode_uuid);
            return Some(error(req, OzoneResult::InvalidArgument, msg));
        }
        None
    }

    async fn container_for(&self, cmd: Type, req: &Request) -> StoreResult<Arc<Container>> {
        if let Some(c) = self.store.get(req.container_id) {
            return Ok(c);
        }
        // Only writes auto-create (no release has `containerAutoCreate`: the field is ignored);
        // a payload-less write creates the container too, and is then answered
        // MALFORMED_REQUEST. The new container's replicaIndex is the request blockID's.
        let replica_index = match cmd {
            Type::WriteChunk => req.write_chunk.as_ref().map(|w| w.block_id.replica_index),
            Type::PutBlock => req
                .put_block
                .as_ref()
                .map(|p| p.block_data.block_id.replica_index),
            Type::PutSmallFile | Type::StreamInit => Some(None),
            _ => None,
        };
        let Some(replica_index) = replica_index.or(match cmd {
            Type::WriteChunk | Type::PutBlock => Some(None),
            _ => None,
        }) else {
            return self.store.lookup(req.container_id);
        };
        let replica_index = replica_index.unwrap_or(0);
        if replica_index > 0 && req.datanode_uuid != self.node.datanode_uuid {
            // The synthetic CreateContainer fails its EC check: INVALID_ARGUMENT.
            return Err(StoreError::new(
                OzoneResult::InvalidArgument,
                format!("ContainerID {} creation failed", req.container_id),
            ));
        }
        self.store
            .try_get_or_create_replica(req.container_id, replica_index)
            .await
            .map_err(|e| {
                if is_creation_failure(e.result) || e.result == OzoneResult::ContainerAlreadyExists
                {
                    // HddsDispatcher.dispatchRequest: the synthetic CreateContainer's result,
                    // under its own message.
                    StoreError::new(
                        e.result,
                        format!("ContainerID {} creation failed", req.container_id),
                    )
                } else {
                    e
                }
            })
    }

    /// CreateContainer: OPEN (or the requested `state`), with `replicaIndex` and `metadata`;
    /// CONTAINER_ALREADY_EXISTS if present (which 2.0 and 2.1 count as a failed write of the
    /// existing container). An EC replica (`replicaIndex` > 0) must name this DataNode: else its
    /// INVALID_ARGUMENT meets a null container in the dispatcher, which throws (gRPC UNKNOWN).
    pub async fn create_container(&self, req: &mut Request) -> Result<Response, Status> {
        let Some(create) = req.create_container.take() else {
            return Ok(malformed(req));
        };
        if let Some(existing) = self.store.get(req.container_id) {
            if let Some(resp) = self.check_node(&existing, req) {
                return self.after_handler(true, &existing, resp).await;
            }
            let resp = fail(
                req,
                StoreError::new(
                    OzoneResult::ContainerAlreadyExists,
                    "Container creation failed because key value container already exists",
                ),
            );
            return self.after_handler(true, &existing, resp).await;
        }
        let replica_index = create.replica_index.unwrap_or(0);
        if replica_index > 0 && req.datanode_uuid != self.node.datanode_uuid {
            return Err(Status::new(tonic::Code::Unknown, ""));
        }
        let state = create
            .state
            .and_then(|s| State::try_from(s).ok())
            .unwrap_or(State::Open);
        let result = self
            .store
            .create_replica_async(req.container_id, state, replica_index)
            .await;
        match result {
            Ok(c) => {
                let metadata = create.metadata;
                let uuid = self.node.datanode_uuid.clone();
                match c.on_disk(move |c| c.set_metadata(&metadata, &uuid)).await {
                    Ok(()) => Ok(success(req)),
                    Err(e) => {
                        // Metadata over the account, or a `.container` file the disk refused
                        // (Ozone writes the metadata with the file): no container is left.
                        self.store.remove_async(c.id()).await;
                        if is_creation_failure(e.result) {
                            Err(Status::new(tonic::Code::Unknown, ""))
                        } else {
                            Ok(fail(req, e))
                        }
                    }
                }
            }
            // The disk would not take it: no container, and HddsDispatcher's step 8 meets a
            // null container for a failure it cannot ignore and throws (gRPC UNKNOWN).
            Err(e) if is_creation_failure(e.result) => Err(Status::new(tonic::Code::Unknown, "")),
            // Created by a concurrent request in between.
            Err(e) => Ok(fail(req, e)),
        }
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

    /// UpdateContainer: SUCCESS, message "", no sub-message; see [`Container::update`].
    pub async fn update_container(&self, c: &Arc<Container>, req: &mut Request) -> Response {
        let Some(update) = req.update_container.take() else {
            return malformed(req);
        };
        let force = update.force_update.unwrap_or(false);
        let uuid = self.node.datanode_uuid.clone();
        let updated = c
            .on_disk(move |c| c.update(&update.metadata, force, &uuid))
            .await;
        match updated {
            Ok(()) => success(req),
            Err(e) => fail(req, e),
        }
    }

    /// DeleteContainer: see [`Container::check_delete`]; on success the container is gone
    /// (later requests: CONTAINER_NOT_FOUND, a write auto-creates it again).
    pub async fn delete_container(&self, c: &Container, req: &mut Request) -> Response {
        let Some(delete) = req.delete_container.take() else {
            return malformed(req);
        };
        match c.check_delete(delete.force_delete.unwrap_or(false)) {
            Ok(()) => {
                self.store.remove_async(c.id()).await;
                success(req)
            }
            Err(e) => fail(req, e),
        }
    }

    /// GetContainerChecksumInfo (2.1+): UNCLOSED_CONTAINER_IO unless CLOSED, QUASI_CLOSED or
    /// UNHEALTHY; else the envelope's containerID and a serialized `ContainerChecksumInfo` whose
    /// tree lists the committed blocks and their chunks (dn-sim computes no tree checksums).
    pub async fn checksum_info(&self, c: &Container, req: &mut Request) -> Response {
        use common::proto::{
            BlockMerkleTree, ChunkMerkleTree, ContainerChecksumInfo, ContainerMerkleTree,
            GetContainerChecksumInfoResponseProto,
        };
        if req.get_container_checksum_info.take().is_none() {
            return malformed(req);
        }
        if let Err(e) = c.check_checksum_info() {
            return fail(req, e);
        }
        let blocks = match c.list_blocks(None, i32::MAX as u32).await {
            Ok(blocks) => blocks,
            Err(e) => return fail(req, e),
        };
        let mut blocks: Vec<BlockMerkleTree> = blocks
            .into_iter()
            .map(|b| BlockMerkleTree {
                block_id: Some(b.block_id.local_id),
                chunk_merkle_tree: b
                    .chunks
                    .iter()
                    .map(|ch| ChunkMerkleTree {
                        offset: Some(ch.offset as i64),
                        length: Some(ch.len as i64),
                        checksum_matches: Some(true),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        blocks.sort_by_key(|b| b.block_id);
        let info = ContainerChecksumInfo {
            container_id: Some(c.id()),
            container_merkle_tree: Some(ContainerMerkleTree {
                block_merkle_tree: blocks,
                ..Default::default()
            }),
        };
        let mut resp = envelope(req, OzoneResult::Success);
        resp.get_container_checksum_info = Some(GetContainerChecksumInfoResponseProto {
            container_id: Some(c.id()),
            container_checksum_info: Some(info.encode_to_vec().into()),
        });
        resp
    }

    /// ReadBlock (2.2, `HddsDispatcher.streamDataReadOnly`): the container must exist (no node
    /// check, nothing marked); the block's data from the checksum window holding `offset`, with
    /// the stored checksums covering it. The DataNode streams it as one response per
    /// `responseDataSize` bytes (1 MiB by default); dn-sim answers one request with one
    /// response, so several pieces are joined into one (data and checksums in order).
    pub async fn read_block(&self, req: &mut Request) -> Response {
        let container = match self.store.lookup(req.container_id) {
            Ok(c) => c,
            Err(e) => return fail(req, e),
        };
        let Some(read) = req.read_block.take() else {
            return malformed(req);
        };
        let describe = read_block_text(&read);
        let result = container
            .read_block_pieces(
                &read.block_id,
                read.offset,
                read.length.unwrap_or(0),
                read.response_data_size.unwrap_or(0),
                &describe,
            )
            .await;
        respond(req, result, |resp, pieces| {
            let mut pieces = pieces.into_iter();
            let Some((mut checksum_data, offset, first)) = pieces.next() else {
                // The DataNode sends no response at all; dn-sim answers an empty piece.
                resp.read_block = Some(ReadBlockResponseProto {
                    checksum_data: Default::default(),
                    offset: read.offset,
                    data: Bytes::new(),
                });
                return;
            };
            let mut data = vec![first];
            for (sums, _, bytes) in pieces {
                checksum_data.checksums.extend(sums.checksums);
                data.push(bytes);
            }
            resp.read_block = Some(ReadBlockResponseProto {
                checksum_data,
                offset,
                data: concat(data),
            });
        })
    }

    /// CloseContainer: to CLOSED (idempotent); CONTAINER_UNHEALTHY for an unhealthy container.
    pub async fn close_container(&self, c: &Arc<Container>, req: &mut Request) -> Response {
        if req.close_container.take().is_none() {
            return malformed(req);
        }
        let uuid = self.node.datanode_uuid.clone();
        match c.on_disk(move |c| c.close(&uuid)).await {
            Ok(()) => success(req),
            Err(e) => fail(req, e),
        }
    }

    /// PutBlock: `eof` absent means true; `size` ≠ the chunk lengths' sum is MALFORMED_REQUEST;
    /// answers `committedBlockLength`.
    pub async fn put_block(
        &self,
        c: &Container,
        req: &mut Request,
        context: DispatcherContext,
    ) -> Response {
        let Some(put) = req.put_block.take() else {
            return malformed(req);
        };
        let version = self.node.version;
        let result = async {
            c.check_open()?;
            let mut put = PutBlock::new(put.block_data, put.eof.unwrap_or(true))
                .map_err(|e| bad_put_block(version, e))?;
            if let Some(index) = context.log_index {
                put = put.with_bcs_id(index);
            }
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
        let version = self.node.version;
        let result = async {
            c.check_open()?;
            // An absent chunkData reads as the default ChunkInfo in Java: len 0, a no-op write.
            let chunk = write.chunk_data.unwrap_or_default();
            let data = write.data.unwrap_or_default();
            match write.block {
                Some(put) => {
                    // Handled after the write: a malformed PutBlock fails with the chunk
                    // written (2.1+: IO_EXCEPTION "Write Chunk failed"; 2.0: the handler's
                    // RuntimeException catch).
                    let put =
                        PutBlock::new(put.block_data, put.eof.unwrap_or(false)).map_err(|_| {
                            match version {
                                OzoneVersion::V2_0 => StoreError::new(
                                    OzoneResult::ContainerInternalError,
                                    "java.lang.IllegalArgumentException",
                                ),
                                _ => {
                                    StoreError::new(OzoneResult::IoException, "Write Chunk failed")
                                }
                            }
                        });
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
    /// that chunk, in one call. Over Ratis its bcsId is the transaction's log index, as
    /// PutBlock's (`KeyValueHandler.handlePutSmallFile`).
    pub async fn put_small_file(
        &self,
        c: &Container,
        req: &mut Request,
        context: DispatcherContext,
    ) -> Response {
        let Some(small) = req.put_small_file.take() else {
            return malformed(req);
        };
        let version = self.node.version;
        let result = async {
            c.check_open()?;
            // The request's BlockData is checked as sent (2.1+: PUT_SMALL_FILE_ERROR "Read Chunk
            // failed" (sic); 2.0: the handler's RuntimeException catch, then the audit throws),
            // then its chunks become the one chunk.
            let mut block = PutBlock::new(small.block.block_data, true)
                .map_err(|_| match version {
                    OzoneVersion::V2_0 => StoreError::new(
                        OzoneResult::ContainerInternalError,
                        "java.lang.IllegalArgumentException",
                    ),
                    _ => StoreError::new(OzoneResult::PutSmallFileError, "Read Chunk failed"),
                })?
                .block()
                .clone();
            block.chunks = vec![small.chunk_info.clone()];
            block.size = None;
            let mut put = PutBlock::new(block, true)?;
            if let Some(index) = context.log_index {
                put = put.with_bcs_id(index);
            }
            let block_id = put.block().block_id;
            c.write_chunk_and_put(&block_id, &small.chunk_info, small.data, Ok(put))
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
                    "java.lang.NullPointerException",
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

/// Whether a failed write's result marks the container UNHEALTHY (`canIgnoreException`; 2.2
/// added MALFORMED_REQUEST and CONTAINER_ALREADY_EXISTS to the ignored ones). DISK_OUT_OF_SPACE
/// does not: the DataNode answers it from its volume check before the handler runs, and
/// dn-sim's capacity check inside a write stands for that check.
pub fn marks_unhealthy(version: OzoneVersion, result: i32) -> bool {
    match OzoneResult::try_from(result) {
        Ok(
            OzoneResult::Success
            | OzoneResult::ContainerUnhealthy
            | OzoneResult::ClosedContainerIo
            | OzoneResult::DeleteOnOpenContainer
            | OzoneResult::UnsupportedRequest
            | OzoneResult::ContainerMissing
            | OzoneResult::DiskOutOfSpace,
        ) => false,
        Ok(OzoneResult::MalformedRequest | OzoneResult::ContainerAlreadyExists) => {
            !version.at_least(OzoneVersion::V2_2)
        }
        _ => true,
    }
}

/// A PutBlock whose `size` is not the sum of its chunks' lengths, as each release answers it:
/// 2.2 MALFORMED_REQUEST "Malformed PutBlock request" (not marked), 2.1 IO_EXCEPTION "Put Key
/// failed" (marks), 2.0 the handler's RuntimeException catch (marks; then the audit throws).
fn bad_put_block(version: OzoneVersion, _e: StoreError) -> StoreError {
    match version {
        OzoneVersion::V2_0 => StoreError::new(
            OzoneResult::ContainerInternalError,
            "java.lang.IllegalArgumentException",
        ),
        OzoneVersion::V2_1 => StoreError::new(OzoneResult::IoException, "Put Key failed"),
        OzoneVersion::V2_2 => {
            StoreError::new(OzoneResult::MalformedRequest, "Malformed PutBlock request")
        }
    }
}

/// Whether a PutBlock or PutSmallFile carries a BlockData whose `size` ≠ its chunks' sum.
fn bad_block_size(cmd: Type, req: &Request) -> bool {
    let block = match cmd {
        Type::PutBlock => req.put_block.as_ref().map(|p| &p.block_data),
        Type::PutSmallFile => req.put_small_file.as_ref().map(|p| &p.block.block_data),
        _ => None,
    };
    block.is_some_and(|b| PutBlock::new(b.clone(), true).is_err())
}

/// The EC node check's message (`KeyValueHandler.validateRequestDatanodeId`).
fn wrong_node(request_uuid: &str, node_uuid: &str) -> String {
    format!(
        "Request is trying to write to node with uuid : {request_uuid} but the current nodeId \
         is: {node_uuid} ."
    )
}

/// A command type the release does not define: a parse failure, gRPC UNKNOWN (2.0's grpc sends
/// no description).
fn unparsable(version: OzoneVersion) -> Status {
    let msg = if version.at_least(OzoneVersion::V2_1) {
        "Application error processing RPC"
    } else {
        ""
    };
    Status::new(tonic::Code::Unknown, msg)
}

/// `ReadBlockRequestProto.toString()` (protobuf text format), for ReadBlock's error messages.
fn read_block_text(read: &common::proto::ReadBlockRequestProto) -> String {
    let id = &read.block_id;
    let mut s = format!(
        "blockID {{\n  containerID: {}\n  localID: {}\n",
        id.container_id, id.local_id
    );
    if let Some(b) = id.block_commit_sequence_id {
        s.push_str(&format!("  blockCommitSequenceId: {b}\n"));
    }
    if let Some(r) = id.replica_index {
        s.push_str(&format!("  replicaIndex: {r}\n"));
    }
    s.push_str(&format!("}}\noffset: {}\n", read.offset));
    if let Some(l) = read.length {
        s.push_str(&format!("length: {l}\n"));
    }
    if let Some(n) = read.response_data_size {
        s.push_str(&format!("responseDataSize: {n}\n"));
    }
    s
}

/// `getSuccessResponse`: SUCCESS, message "", no sub-message (CreateContainer, UpdateContainer,
/// DeleteContainer, CloseContainer).
fn success(req: &mut Request) -> Response {
    let mut resp = envelope(req, OzoneResult::Success);
    resp.message = Some(String::new());
    resp
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
/// types dn-sim does not simulate (the Stream* types) answer the same code and say so.
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

/// Results of a container creation the disk refused (`KeyValueContainer.create`).
fn is_creation_failure(result: OzoneResult) -> bool {
    matches!(
        result,
        OzoneResult::ContainerInternalError | OzoneResult::ContainerFilesCreateError
    )
}
