//! A structured sequence of requests (`arbitrary`) through dn-sim's dispatcher
//! (`Admission::dispatch`: pool, no delays or faults → `KeyValueHandler::handle` → the store),
//! checked request by request against a model: the model of the store's proptest
//! (dn-sim/src/datanode/store/tests.rs, `run_model`: one `Vec<u8>` per block, the FILE_PER_BLOCK write
//! and read rules, PutBlock, GetBlock, capacity), ported here (it lives in a test module) and
//! extended with what the dispatcher adds: containers (create, auto-create on WriteChunk and
//! PutBlock, close, delete with and without force), their states (a failed write marks an OPEN
//! container UNHEALTHY; on a container that is not OPEN the call fails with gRPC UNKNOWN), the
//! volume-full check, ReadContainer's counters. Every request is encoded and passed through the
//! wire check and prost's decode first, as the server's codec does. Ozone 2.2 rules; memory and
//! discard stores (not `dir:`: file I/O per input would make the target slow).
#![no_main]

use arbitrary::Arbitrary;
use bytes::Bytes;
use common::proto::container_data_proto::State;
use common::proto::read_chunk_response_proto::ResponseData;
use common::proto::{
    BlockData, ChecksumData, ChecksumType, ChunkInfo, CloseContainerRequestProto,
    ContainerCommandRequestProto as Request, ContainerCommandResponseProto as Response,
    CreateContainerRequestProto, DatanodeBlockId, DeleteContainerRequestProto,
    GetBlockRequestProto, GetCommittedBlockLengthRequestProto, PutBlockRequestProto,
    ReadChunkRequestProto, ReadChunkVersion, ReadContainerRequestProto, Result as OzoneResult,
    Type, WriteChunkRequestProto,
};
use common::wire::RequiredFields;
use dn_sim::sim::admission::{Admission, AdmissionConfig, NodeIdentity, Outcome};
use dn_sim::datanode::store::{ContainerStore, StoreKind};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use rand::SeedableRng;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

const CONTAINERS: usize = 2;
const BLOCKS: usize = 3;
const BPC: u32 = 512;
const UUID: &str = "fuzz-dn";

#[derive(Arbitrary, Debug, Clone, Copy)]
enum At {
    /// At the block's length.
    End,
    /// At `len * n / 256`: inside the block (or at 0).
    Inside(u8),
    /// `1 + n` bytes past the length.
    Past(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Skew {
    Exact,
    Short,
    Long,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum NewState {
    Default,
    Open,
    Closed,
    QuasiClosed,
    Unhealthy,
}

/// A PutBlock piggybacked on a WriteChunk (what Ozone's client sends at the end of a block).
#[derive(Arbitrary, Debug, Clone, Copy)]
struct Piggyback {
    /// For the next block rather than the written one.
    other: bool,
    chunk_len: u8,
    eof: Option<bool>,
    bad_size: bool,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Create {
        c: u8,
        state: NewState,
    },
    Close {
        c: u8,
    },
    Delete {
        c: u8,
        force: bool,
    },
    ReadContainer {
        c: u8,
    },
    Write {
        c: u8,
        block: u8,
        at: At,
        len: u16,
        skew: Skew,
        seed: u8,
        put: Option<Piggyback>,
    },
    Read {
        c: u8,
        block: u8,
        at: At,
        len: u16,
        v1: bool,
    },
    Put {
        c: u8,
        block: u8,
        chunk_len: u8,
        eof: Option<bool>,
        bad_size: bool,
    },
    Get {
        c: u8,
        block: u8,
    },
    CommittedLength {
        c: u8,
        block: u8,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    discard: bool,
    /// `None`: unlimited; else one of `CAPACITIES`, small enough to be reached.
    capacity: Option<u8>,
    ops: Vec<Op>,
}

#[derive(Debug, Default, Clone)]
struct ModelBlock {
    data: Vec<u8>,
    /// The block file exists (a non-empty write succeeded).
    exists: bool,
    /// The size of the last successful PutBlock.
    committed: Option<i64>,
}

#[derive(Debug, Clone)]
struct ModelContainer {
    state: State,
    blocks: Vec<ModelBlock>,
}

impl ModelContainer {
    fn new(state: State) -> Self {
        Self {
            state,
            blocks: vec![ModelBlock::default(); BLOCKS],
        }
    }
    fn held(&self) -> u64 {
        self.blocks.iter().map(|b| b.data.len() as u64).sum()
    }
    fn committed(&self) -> u64 {
        self.blocks.iter().filter(|b| b.committed.is_some()).count() as u64
    }
    /// `Container::check_open`.
    fn check_open(&self) -> Result<(), OzoneResult> {
        match self.state {
            State::Open => Ok(()),
            State::Closed | State::QuasiClosed => Err(OzoneResult::ClosedContainerIo),
            State::Unhealthy => Err(OzoneResult::ContainerUnhealthy),
            s => unreachable!("the model makes no {s:?} container"),
        }
    }
}

/// What the dispatcher must answer.
#[derive(Debug, PartialEq)]
enum Expect {
    Result(OzoneResult),
    /// The call fails with gRPC UNKNOWN (a failed write on a container that is not OPEN).
    Unknown,
}

struct Model {
    holds_data: bool,
    capacity: u64,
    used: u64,
    containers: Vec<Option<ModelContainer>>,
}

impl Model {
    fn is_full(&self) -> bool {
        self.holds_data && self.used >= self.capacity
    }

    /// `HddsDispatcher` after the handler, 2.2's `canIgnoreException`.
    fn after_write(&mut self, c: usize, result: OzoneResult) -> Expect {
        let marks = !matches!(
            result,
            OzoneResult::Success
                | OzoneResult::ContainerUnhealthy
                | OzoneResult::ClosedContainerIo
                | OzoneResult::DeleteOnOpenContainer
                | OzoneResult::UnsupportedRequest
                | OzoneResult::ContainerMissing
                | OzoneResult::DiskOutOfSpace
                | OzoneResult::MalformedRequest
                | OzoneResult::ContainerAlreadyExists
        );
        if !marks {
            return Expect::Result(result);
        }
        let m = self.containers[c].as_mut().expect("a container");
        if m.state == State::Open {
            m.state = State::Unhealthy;
            Expect::Result(result)
        } else {
            Expect::Unknown
        }
    }
}

fn bid(c: usize, block: usize) -> DatanodeBlockId {
    DatanodeBlockId {
        container_id: c as i64 + 1,
        local_id: block as i64,
        ..Default::default()
    }
}

fn chunk(offset: u64, len: u64) -> ChunkInfo {
    ChunkInfo {
        chunk_name: format!("chunk_{offset}"),
        offset,
        len,
        checksum_data: ChecksumData {
            r#type: ChecksumType::None as i32,
            bytes_per_checksum: 16 << 10,
            checksums: Vec::new(),
        },
        ..Default::default()
    }
}

fn data(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

fn offset(at: At, len: u64) -> u64 {
    match at {
        At::End => len,
        At::Inside(n) => len * u64::from(n) / 256,
        At::Past(n) => len + 1 + u64::from(n),
    }
}

fn request(cmd: Type, c: usize) -> Request {
    Request {
        cmd_type: cmd as i32,
        container_id: c as i64 + 1,
        datanode_uuid: UUID.to_string(),
        ..Default::default()
    }
}

/// Through the wire as the server's codec sees it: encode, required check, decode.
fn over_the_wire(req: &Request) -> Request {
    let bytes = req.encode_to_vec();
    Request::check_required(&bytes).expect("the target builds complete requests");
    Request::decode(bytes.as_slice()).expect("a request prost encoded decodes")
}

fn runtime() -> &'static tokio::runtime::Runtime {
    thread_local! {
        static RT: &'static tokio::runtime::Runtime = Box::leak(Box::new(
            tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(),
        ));
    }
    RT.with(|rt| *rt)
}

fn check(cmd: Type, outcome: &Outcome, expect: &Expect, op: &Op) -> Option<Response> {
    match (outcome, expect) {
        (Outcome::Answer(resp), Expect::Result(want)) => {
            let got = OzoneResult::try_from(resp.result).ok();
            assert_eq!(got, Some(*want), "{op:?}: {resp:?}");
            assert_eq!(resp.cmd_type, cmd as i32, "{op:?}");
            (*want == OzoneResult::Success).then(|| resp.clone())
        }
        (Outcome::Fail(status), Expect::Unknown) => {
            assert_eq!(status.code(), tonic_code_unknown(), "{op:?}: {status:?}");
            None
        }
        (Outcome::Answer(resp), want) => panic!("{op:?}: expected {want:?}, got {resp:?}"),
        (Outcome::Fail(status), want) => panic!("{op:?}: expected {want:?}, got {status:?}"),
        (Outcome::Drop, want) => panic!("{op:?}: expected {want:?}, got no answer"),
        (Outcome::Reset, want) => panic!("{op:?}: expected {want:?}, got a reset"),
    }
}

fn tonic_code_unknown() -> tonic::Code {
    tonic::Code::Unknown
}

const CAPACITIES: [u64; 8] = [0, 1, 100, 1000, 3000, 5000, 10_000, 20_000];

type Server = (Arc<ContainerStore>, Admission);

/// An admission and its store per (kind, capacity), made once per process: a new admission
/// fills a 1 MiB echo payload buffer, which would cost more than the whole sequence. Each run
/// leaves its store empty (checked), so runs do not see each other.
fn server(discard: bool, capacity: u64) -> Rc<Server> {
    thread_local! {
        static SERVERS: RefCell<HashMap<(bool, u64), Rc<Server>>> = RefCell::new(HashMap::new());
    }
    SERVERS.with(|servers| {
        Rc::clone(
            servers
                .borrow_mut()
                .entry((discard, capacity))
                .or_insert_with(|| {
                    let kind = if discard {
                        StoreKind::Discard
                    } else {
                        StoreKind::Memory
                    };
                    let store = Arc::new(ContainerStore::new(kind, capacity, None).unwrap());
                    let admission = Admission::from_config(
                        Arc::clone(&store),
                        AdmissionConfig {
                            node: NodeIdentity {
                                datanode_uuid: UUID.to_string(),
                                version: dn_sim::datanode::version::OzoneVersion::V2_2,
                            },
                            handler_count: 1,
                            ..AdmissionConfig::default()
                        },
                    )
                    .unwrap();
                    Rc::new((store, admission))
                }),
        )
    })
}

async fn run(input: Input) {
    let capacity = input
        .capacity
        .map_or(u64::MAX, |c| CAPACITIES[usize::from(c) % CAPACITIES.len()]);
    let server = server(input.discard, capacity);
    let (store, admission) = (&server.0, &server.1);
    assert!(
        store.is_empty() && store.used() == 0,
        "a run left its store non-empty"
    );
    let kind = store.kind().clone();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
    let mut model = Model {
        holds_data: kind.holds_data(),
        capacity,
        used: 0,
        containers: vec![None; CONTAINERS],
    };

    for op in input.ops.iter().take(64) {
        let (cmd, req, expect, then): (Type, Request, Expect, Then) = match *op {
            Op::Create { c, state } => {
                let c = usize::from(c) % CONTAINERS;
                let mut req = request(Type::CreateContainer, c);
                let new_state = match state {
                    NewState::Default => None,
                    NewState::Open => Some(State::Open),
                    NewState::Closed => Some(State::Closed),
                    NewState::QuasiClosed => Some(State::QuasiClosed),
                    NewState::Unhealthy => Some(State::Unhealthy),
                };
                req.create_container = Some(CreateContainerRequestProto {
                    state: new_state.map(|s| s as i32),
                    ..Default::default()
                });
                let expect = if model.containers[c].is_some() {
                    model.after_write(c, OzoneResult::ContainerAlreadyExists)
                } else {
                    model.containers[c] =
                        Some(ModelContainer::new(new_state.unwrap_or(State::Open)));
                    Expect::Result(OzoneResult::Success)
                };
                (Type::CreateContainer, req, expect, Then::Nothing)
            }
            Op::Close { c } => {
                let c = usize::from(c) % CONTAINERS;
                let mut req = request(Type::CloseContainer, c);
                req.close_container = Some(CloseContainerRequestProto {});
                let expect = match &mut model.containers[c] {
                    None => Expect::Result(OzoneResult::ContainerNotFound),
                    Some(m) => match m.state {
                        State::Unhealthy => model.after_write(c, OzoneResult::ContainerUnhealthy),
                        _ => {
                            m.state = State::Closed;
                            Expect::Result(OzoneResult::Success)
                        }
                    },
                };
                (Type::CloseContainer, req, expect, Then::Nothing)
            }
            Op::Delete { c, force } => {
                let c = usize::from(c) % CONTAINERS;
                let mut req = request(Type::DeleteContainer, c);
                req.delete_container = Some(DeleteContainerRequestProto {
                    force_delete: Some(force),
                });
                let expect = match &model.containers[c] {
                    None => Expect::Result(OzoneResult::ContainerNotFound),
                    Some(m) if !force && m.state == State::Open => {
                        model.after_write(c, OzoneResult::DeleteOnOpenContainer)
                    }
                    Some(m) if !force && m.committed() > 0 => {
                        model.after_write(c, OzoneResult::DeleteOnNonEmptyContainer)
                    }
                    Some(m) => {
                        if model.holds_data {
                            model.used -= m.held();
                        }
                        model.containers[c] = None;
                        Expect::Result(OzoneResult::Success)
                    }
                };
                (Type::DeleteContainer, req, expect, Then::Nothing)
            }
            Op::ReadContainer { c } => {
                let c = usize::from(c) % CONTAINERS;
                let mut req = request(Type::ReadContainer, c);
                req.read_container = Some(ReadContainerRequestProto {});
                let (expect, then) = match &model.containers[c] {
                    None => (
                        Expect::Result(OzoneResult::ContainerNotFound),
                        Then::Nothing,
                    ),
                    Some(m) => (
                        Expect::Result(OzoneResult::Success),
                        Then::Container {
                            state: m.state,
                            held: m.held(),
                            committed: m.committed(),
                        },
                    ),
                };
                (Type::ReadContainer, req, expect, then)
            }
            Op::Write {
                c,
                block,
                at,
                len,
                skew,
                seed,
                put,
            } => {
                let c = usize::from(c) % CONTAINERS;
                let block = usize::from(block) % BLOCKS;
                let len = u64::from(len % 4096);
                let is_full = model.is_full();
                // Auto-create.
                let m = model.containers[c].get_or_insert_with(|| ModelContainer::new(State::Open));
                let b = &m.blocks[block];
                let off = offset(at, b.data.len() as u64);
                let actual = match skew {
                    Skew::Exact => len,
                    Skew::Short => len.saturating_sub(1),
                    Skew::Long => len + 1,
                };
                let put = put.map(|p| {
                    let pblock = if p.other { (block + 1) % BLOCKS } else { block };
                    (pblock, u64::from(p.chunk_len % 3), p)
                });
                let mut req = request(Type::WriteChunk, c);
                req.write_chunk = Some(WriteChunkRequestProto {
                    block_id: bid(c, block),
                    chunk_data: Some(chunk(off, len)),
                    data: Some(data(actual as usize, seed)),
                    block: put.map(|(pblock, chunk_len, p)| PutBlockRequestProto {
                        block_data: BlockData {
                            block_id: bid(c, pblock),
                            chunks: if chunk_len > 0 {
                                vec![chunk(0, chunk_len)]
                            } else {
                                vec![]
                            },
                            size: p.bad_size.then_some(chunk_len as i64 + 1),
                            ..Default::default()
                        },
                        eof: p.eof,
                        ..Default::default()
                    }),
                    ..Default::default()
                });
                let end = off + len;
                let growth = end.saturating_sub(b.data.len() as u64);
                let full = m.state == State::Open && is_full;
                let result = if full {
                    Err(OzoneResult::DiskOutOfSpace)
                } else if let Err(e) = m.check_open() {
                    Err(e)
                } else if len == 0 {
                    Ok(())
                } else if off > b.data.len() as u64 {
                    Err(OzoneResult::ChunkFileInconsistency)
                } else if actual != len {
                    Err(OzoneResult::InvalidWriteSize)
                } else if model.holds_data && model.used + growth > model.capacity {
                    Err(OzoneResult::DiskOutOfSpace)
                } else {
                    Ok(())
                };
                let expect = match result {
                    Ok(()) => {
                        if len > 0 {
                            let m = model.containers[c].as_mut().unwrap();
                            let b = &mut m.blocks[block];
                            let d = data(len as usize, seed);
                            if b.data.len() < end as usize {
                                b.data.resize(end as usize, 0);
                            }
                            b.data[off as usize..end as usize].copy_from_slice(&d);
                            b.exists = true;
                            if model.holds_data {
                                model.used += growth;
                            }
                        }
                        // The piggybacked PutBlock, after the write (which stays written).
                        match put {
                            None => (Expect::Result(OzoneResult::Success), Then::Written(None)),
                            // A malformed one: 2.2's IO_EXCEPTION "Write Chunk failed".
                            Some((_, _, p)) if p.bad_size => (
                                model.after_write(c, OzoneResult::IoException),
                                Then::Nothing,
                            ),
                            Some((pblock, chunk_len, p)) => {
                                let m = model.containers[c].as_mut().unwrap();
                                let pb = &mut m.blocks[pblock];
                                // Absent `eof` is false for a piggybacked PutBlock.
                                if p.eof.unwrap_or(false) && chunk_len > 0 && !pb.exists {
                                    (
                                        model.after_write(c, OzoneResult::UnableToFindChunk),
                                        Then::Nothing,
                                    )
                                } else {
                                    pb.committed = Some(chunk_len as i64);
                                    (
                                        Expect::Result(OzoneResult::Success),
                                        Then::Written(Some(chunk_len as i64)),
                                    )
                                }
                            }
                        }
                    }
                    Err(e) => (model.after_write(c, e), Then::Nothing),
                };
                let (expect, then) = expect;
                (Type::WriteChunk, req, expect, then)
            }
            Op::Read {
                c,
                block,
                at,
                len,
                v1,
            } => {
                let c = usize::from(c) % CONTAINERS;
                let block = usize::from(block) % BLOCKS;
                let len = u64::from(len % 5000);
                let b = model.containers[c].as_ref().map(|m| &m.blocks[block]);
                let off = offset(at, b.map_or(0, |b| b.data.len() as u64));
                let mut info = chunk(off, len);
                info.checksum_data =
                    common::checksum::compute(ChecksumType::Crc32, BPC, &[]).unwrap();
                let mut req = request(Type::ReadChunk, c);
                req.read_chunk = Some(ReadChunkRequestProto {
                    block_id: bid(c, block),
                    chunk_data: info,
                    read_chunk_version: v1.then_some(ReadChunkVersion::V1 as i32),
                });
                let (expect, then) = match b {
                    None => (
                        Expect::Result(OzoneResult::ContainerNotFound),
                        Then::Nothing,
                    ),
                    Some(_) if len == 0 => (
                        Expect::Result(OzoneResult::Success),
                        Then::Data {
                            want: Vec::new(),
                            pieces: 1,
                            v1,
                        },
                    ),
                    Some(b) if !b.exists => (
                        Expect::Result(OzoneResult::UnableToFindChunk),
                        Then::Nothing,
                    ),
                    Some(b) if off + len > b.data.len() as u64 => (
                        Expect::Result(OzoneResult::ContainerInternalError),
                        Then::Nothing,
                    ),
                    Some(_) if !model.holds_data => (
                        Expect::Result(OzoneResult::UnableToFindChunk),
                        Then::Nothing,
                    ),
                    Some(b) => (
                        Expect::Result(OzoneResult::Success),
                        Then::Data {
                            want: b.data[off as usize..(off + len) as usize].to_vec(),
                            pieces: if v1 { len.div_ceil(u64::from(BPC)) } else { 1 },
                            v1,
                        },
                    ),
                };
                (Type::ReadChunk, req, expect, then)
            }
            Op::Put {
                c,
                block,
                chunk_len,
                eof,
                bad_size,
            } => {
                let c = usize::from(c) % CONTAINERS;
                let block = usize::from(block) % BLOCKS;
                let chunk_len = u64::from(chunk_len % 3);
                let chunks = if chunk_len > 0 {
                    vec![chunk(0, chunk_len)]
                } else {
                    vec![]
                };
                let mut req = request(Type::PutBlock, c);
                req.put_block = Some(PutBlockRequestProto {
                    block_data: BlockData {
                        block_id: bid(c, block),
                        chunks,
                        size: bad_size.then_some(chunk_len as i64 + 1),
                        ..Default::default()
                    },
                    eof,
                    ..Default::default()
                });
                let is_full = model.is_full();
                let m = model.containers[c].get_or_insert_with(|| ModelContainer::new(State::Open));
                let full = m.state == State::Open && is_full;
                let b = &m.blocks[block];
                let result = if full {
                    Err(OzoneResult::DiskOutOfSpace)
                } else if let Err(e) = m.check_open() {
                    Err(e)
                } else if bad_size {
                    Err(OzoneResult::MalformedRequest)
                } else if eof.unwrap_or(true) && chunk_len > 0 && !b.exists {
                    Err(OzoneResult::UnableToFindChunk)
                } else {
                    Ok(())
                };
                let (expect, then) = match result {
                    Ok(()) => {
                        model.containers[c].as_mut().unwrap().blocks[block].committed =
                            Some(chunk_len as i64);
                        (
                            Expect::Result(OzoneResult::Success),
                            Then::Committed(chunk_len as i64),
                        )
                    }
                    Err(e) => (model.after_write(c, e), Then::Nothing),
                };
                (Type::PutBlock, req, expect, then)
            }
            Op::Get { c, block } => {
                let c = usize::from(c) % CONTAINERS;
                let block = usize::from(block) % BLOCKS;
                let mut req = request(Type::GetBlock, c);
                req.get_block = Some(GetBlockRequestProto {
                    block_id: bid(c, block),
                    ..Default::default()
                });
                let (expect, then) = match &model.containers[c] {
                    None => (
                        Expect::Result(OzoneResult::ContainerNotFound),
                        Then::Nothing,
                    ),
                    Some(m) => match m.blocks[block].committed {
                        None => (Expect::Result(OzoneResult::NoSuchBlock), Then::Nothing),
                        Some(size) => (Expect::Result(OzoneResult::Success), Then::Block(size)),
                    },
                };
                (Type::GetBlock, req, expect, then)
            }
            Op::CommittedLength { c, block } => {
                let c = usize::from(c) % CONTAINERS;
                let block = usize::from(block) % BLOCKS;
                let mut req = request(Type::GetCommittedBlockLength, c);
                req.get_committed_block_length = Some(GetCommittedBlockLengthRequestProto {
                    block_id: bid(c, block),
                });
                let (expect, then) = match &model.containers[c] {
                    None => (
                        Expect::Result(OzoneResult::ContainerNotFound),
                        Then::Nothing,
                    ),
                    Some(m) => match m.blocks[block].committed {
                        None => (Expect::Result(OzoneResult::NoSuchBlock), Then::Nothing),
                        Some(size) => (Expect::Result(OzoneResult::Success), Then::Length(size)),
                    },
                };
                (Type::GetCommittedBlockLength, req, expect, then)
            }
        };
        let outcome = admission
            .dispatch(over_the_wire(&req), &mut rng, false)
            .await;
        if let Some(resp) = check(cmd, &outcome, &expect, op) {
            then.check(&resp, op);
        }
    }

    // The counters agree with the model.
    let mut used = 0;
    for (i, m) in model.containers.iter().enumerate() {
        let got = store.get(i as i64 + 1);
        assert_eq!(got.is_some(), m.is_some(), "container {}", i + 1);
        if let (Some(c), Some(m)) = (got, m) {
            assert_eq!(c.state(), m.state, "container {}", i + 1);
            assert_eq!(c.bytes_used(), m.held(), "container {}", i + 1);
            assert_eq!(c.block_count(), m.committed(), "container {}", i + 1);
            used += m.held();
        }
    }
    assert_eq!(model.used, if model.holds_data { used } else { 0 });
    assert_eq!(store.used(), model.used);

    // The server's upkeep task drains histogram samples every few seconds (server.rs); without
    // it they pile up run after run.
    admission.metrics.upkeep();
    // Empty the store for the next run: removing a container frees what it held.
    for i in 0..CONTAINERS {
        store.remove(i as i64 + 1);
    }
    assert_eq!(store.used(), 0, "removed containers still count as used");
    assert!(store.is_empty());
}

/// What a successful answer must carry.
enum Then {
    Nothing,
    Data {
        want: Vec<u8>,
        pieces: u64,
        v1: bool,
    },
    Committed(i64),
    /// A WriteChunk's answer: `committedBlockLength` only with a piggybacked PutBlock.
    Written(Option<i64>),
    Length(i64),
    Block(i64),
    Container {
        state: State,
        held: u64,
        committed: u64,
    },
}

impl Then {
    fn check(&self, resp: &Response, op: &Op) {
        match self {
            Then::Nothing => {}
            Then::Data { want, pieces, v1 } => {
                let read = resp.read_chunk.as_ref().expect("readChunk");
                match (&read.response_data, v1) {
                    (Some(ResponseData::Data(d)), false) => assert_eq!(&d[..], &want[..], "{op:?}"),
                    (Some(ResponseData::DataBuffers(b)), true) => {
                        assert_eq!(b.buffers.concat(), *want, "{op:?}");
                        assert_eq!(b.buffers.len() as u64, *pieces, "{op:?}");
                    }
                    (other, _) => panic!("{op:?}: response data {other:?}"),
                }
            }
            Then::Committed(size) => {
                let put = resp.put_block.as_ref().expect("putBlock");
                assert_eq!(put.committed_block_length.block_length, *size, "{op:?}");
            }
            Then::Written(size) => {
                let write = resp.write_chunk.as_ref().expect("writeChunk");
                let got = write
                    .committed_block_length
                    .as_ref()
                    .map(|l| l.block_length);
                assert_eq!(got, *size, "{op:?}");
            }
            Then::Length(size) => {
                let got = resp
                    .get_committed_block_length
                    .as_ref()
                    .expect("getCommittedBlockLength");
                assert_eq!(got.block_length, *size, "{op:?}");
            }
            Then::Block(size) => {
                let get = resp.get_block.as_ref().expect("getBlock");
                assert_eq!(get.block_data.size, Some(*size), "{op:?}");
                let sum: u64 = get.block_data.chunks.iter().map(|c| c.len).sum();
                assert_eq!(sum as i64, *size, "{op:?}");
            }
            Then::Container {
                state,
                held,
                committed,
            } => {
                let data = resp
                    .read_container
                    .as_ref()
                    .and_then(|r| r.container_data.as_ref())
                    .expect("containerData");
                assert_eq!(data.state, Some(*state as i32), "{op:?}");
                // 2.1 on: `bytesUsed` only when above 0.
                assert_eq!(
                    data.bytes_used,
                    (*held > 0).then_some(*held as i64),
                    "{op:?}"
                );
                assert_eq!(data.block_count, Some(*committed as i64), "{op:?}");
            }
        }
    }
}

fuzz_target!(|input: Input| {
    runtime().block_on(run(input));
});
