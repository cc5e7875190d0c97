//! The Ratis side: a scenario's container commands as Raft requests on one `ordered` stream of the
//! target's Ratis client port (`hdds.container.ratis.ipc.port`), as Ozone's `XceiverClientRatis`
//! sends them, and each Raft reply as JSON.
//!
//! The stream opens as Ratis's sliding window does, with a dummy `watch(0)` answered before
//! anything else goes; its reply's commit index is the scenario's **base**: every log index
//! after it is shown relative to it (`"$BASE+2"`), since the two targets' logs have different
//! lengths. A commit index is `"covers"` when it has reached the stream's last log index (a
//! watch's log index, when it has reached the watched one): by how much it is past is timing. The client id is derived from the scenario's name, so both targets see the
//! same one, and call ids count from 1 on both.
//!
//! An answer is `{"raft_reply": {…}}` (below), or as on the gRPC side a `status` that ended the
//! stream, a `no_answer`, or `undecodable` bytes. The reply's ids are shown as what they are for
//! this target: `$CLIENT` (our client id), `$DN` (the target's DataNode UUID as Ratis peer id),
//! `$PIPELINE` (the Raft group of the target's pipeline), `$OTHER_GROUP` (the group no target
//! hosts, `$OTHER_UUID`).
//!
//! ```json
//! {"raft_reply": {"requestorId": "$CLIENT", "replyId": "$DN", "group": "$PIPELINE", "callId": 3,
//!   "success": true, "message": {"response": {…ContainerCommandResponseProto…}},
//!   "exception": {"kind": "stateMachineException", "class": "…", "message": "…",
//!                 "stacktrace": "<java StackTraceElement[]>"},
//!   "logIndex": "$BASE+1", "commitInfos": [{"server": "$DN", "commitIndex": "covers"}]}}
//! ```

use crate::client::{Client, message_answer, no_answer, status_answer};
use bytes::Bytes;
use common::ratis::proto::common::raft_client_reply_proto::ExceptionDetails;
use common::ratis::proto::common::raft_client_request_proto::Type as RaftType;
use common::ratis::proto::common::{
    ClientMessageEntryProto, RaftClientReplyProto, RaftClientRequestProto, RaftGroupIdProto,
    RaftRpcRequestProto, ReadRequestTypeProto, ReplicationLevel, StaleReadRequestTypeProto,
    WatchRequestTypeProto, WriteRequestTypeProto,
};
use grpc_client::raw::RawCodec;
use prost::Message as _;
use serde_json::{Map, Value as Json, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::Streaming;
use tonic::{Request, Status};

/// How a step's command goes as a Raft request (a scenario step's `ratis.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RaftKind {
    /// As Ozone's client sends it: a read when `HddsUtils.isReadOnly`, else a write.
    #[default]
    Auto,
    Write,
    Read,
    /// A stale read with `minIndex` 0.
    StaleRead,
    /// `watch(BASE + index)`, ALL_COMMITTED, with no message.
    Watch,
}

/// A step's Ratis options (`"ratis": {…}` in a scenario step).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepOptions {
    #[serde(default, rename = "type")]
    pub kind: RaftKind,
    /// `"other"`: the request names a Raft group the target does not host.
    #[serde(default)]
    pub group: Option<String>,
    /// Send with the previous Raft request's call id: a client's retry.
    #[serde(default)]
    pub retry: bool,
    /// For `watch`: the index watched, relative to the base.
    #[serde(default)]
    pub index: u64,
    /// Over the gRPC port instead (a GetBlock after a Ratis PutBlock, a CloseContainer).
    #[serde(default)]
    pub grpc: bool,
}

/// What a reply's ids stand for on this target.
#[derive(Debug, Clone)]
pub struct Names {
    pub datanode_uuid: String,
    pub pipeline: uuid::Uuid,
    pub client_id: uuid::Uuid,
}

/// The group no target hosts: `$OTHER_UUID`'s.
pub fn other_group() -> uuid::Uuid {
    uuid::Uuid::parse_str(crate::placeholders::OTHER_UUID).expect("a valid UUID")
}

/// The client id a scenario uses on both targets: a name-based UUID of the scenario's name.
pub fn client_id(scenario: &str) -> uuid::Uuid {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(scenario.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

enum State {
    NotOpen,
    Open {
        tx: mpsc::Sender<Bytes>,
        inbound: Box<Streaming<Bytes>>,
    },
    /// Why later steps get no answer.
    Ended(String),
}

/// One scenario's `ordered` stream on one target.
pub struct RatisStream {
    client: Client,
    names: Names,
    state: State,
    /// The commit index when the stream opened (see the module notes).
    base: u64,
    /// The highest log index seen on the stream (at least `base`).
    last: u64,
    seq: u64,
    call_id: u64,
}

impl RatisStream {
    pub fn new(client: Client, names: Names) -> RatisStream {
        RatisStream {
            client,
            names,
            state: State::NotOpen,
            base: 0,
            last: 0,
            seq: 0,
            call_id: 0,
        }
    }

    /// The scenario's base index (0 until the stream opened).
    pub fn base(&self) -> u64 {
        self.base
    }

    fn rpc(&mut self, group: uuid::Uuid, retry: bool) -> RaftRpcRequestProto {
        let first = self.seq == 0;
        self.seq += 1;
        if !retry || self.call_id == 0 {
            self.call_id += 1;
        }
        common::ratis::ordered_rpc(
            common::ratis::id_bytes(self.names.client_id),
            Bytes::copy_from_slice(self.names.datanode_uuid.as_bytes()),
            RaftGroupIdProto {
                id: common::ratis::id_bytes(group),
            },
            self.call_id,
            self.seq,
            first,
        )
    }

    /// The Raft request for a step: `command` is the encoded ContainerCommandRequestProto
    /// (`None` for a watch).
    fn request(&mut self, command: Option<&Bytes>, options: &StepOptions) -> Bytes {
        let group = match options.group.as_deref() {
            Some("other") => other_group(),
            _ => self.names.pipeline,
        };
        let decoded =
            command.and_then(|c| common::proto::ContainerCommandRequestProto::decode(&c[..]).ok());
        // A command that does not decode (a raw step) goes as it is, as a write.
        let content = match (&decoded, command) {
            (Some(request), _) => common::ratis::encode_message(request),
            (None, Some(raw)) => raw.clone(),
            (None, None) => Bytes::new(),
        };
        let read_only = decoded.as_ref().is_some_and(common::ratis::is_read_only);
        let r#type = match options.kind {
            RaftKind::Auto if read_only => RaftType::Read(ReadRequestTypeProto::default()),
            RaftKind::Auto | RaftKind::Write => RaftType::Write(WriteRequestTypeProto {
                replication: ReplicationLevel::Majority as i32,
            }),
            RaftKind::Read => RaftType::Read(ReadRequestTypeProto::default()),
            RaftKind::StaleRead => RaftType::StaleRead(StaleReadRequestTypeProto { min_index: 0 }),
            RaftKind::Watch => RaftType::Watch(WatchRequestTypeProto {
                index: self.base + options.index,
                replication: ReplicationLevel::AllCommitted as i32,
            }),
        };
        let request = RaftClientRequestProto {
            rpc_request: Some(self.rpc(group, options.retry)),
            message: Some(ClientMessageEntryProto { content }),
            r#type: Some(r#type),
        };
        Bytes::from(request.encode_to_vec())
    }

    /// Sends one step (opening the stream first if need be) and returns its answer.
    pub async fn send(&mut self, command: Option<&Bytes>, options: &StepOptions) -> Json {
        if let State::Ended(why) = &self.state {
            return no_answer(why.clone());
        }
        if matches!(self.state, State::NotOpen)
            && let Err(answer) = self.open().await
        {
            return answer;
        }
        let message = self.request(command, options);
        let State::Open { tx, .. } = &self.state else {
            return no_answer("the stream is not open");
        };
        if tx.send(message).await.is_err() {
            self.state = State::Ended("the stream is closed".into());
            return no_answer("the request stream is closed");
        }
        let watched = (options.kind == RaftKind::Watch).then(|| self.base + options.index);
        self.receive(watched).await
    }

    /// Opens the stream with the dummy `watch(0)` and waits for its reply, which sets the base.
    async fn open(&mut self) -> Result<(), Json> {
        let timeout = self.client.timeout();
        let (tx, rx) = mpsc::channel(16);
        let watch = self.request(
            None,
            &StepOptions {
                kind: RaftKind::Watch,
                ..Default::default()
            },
        );
        // (base is 0 here: the watch is for index 0.)
        let _ = tx.send(watch).await;
        let mut grpc = self.client.grpc();
        let open = async move {
            grpc.ready()
                .await
                .map_err(|e| Status::unavailable(format!("connection not ready: {e}")))?;
            let path =
                tonic::codegen::http::uri::PathAndQuery::from_static(common::ratis::ORDERED_PATH);
            grpc.streaming(Request::new(ReceiverStream::new(rx)), path, RawCodec)
                .await
        };
        let mut inbound = match tokio::time::timeout(timeout, open).await {
            Err(_) => return Err(self.end_late()),
            Ok(Err(status)) => return Err(self.end_status(&status)),
            Ok(Ok(response)) => Box::new(response.into_inner()),
        };
        match tokio::time::timeout(timeout, inbound.message()).await {
            Err(_) => Err(self.end_late()),
            Ok(Err(status)) => Err(self.end_status(&status)),
            Ok(Ok(None)) => {
                self.state = State::Ended("the stream had ended".into());
                Err(no_answer(
                    "the stream ended before its first watch was answered",
                ))
            }
            Ok(Ok(Some(bytes))) => {
                let reply = RaftClientReplyProto::decode(&bytes[..]).map_err(|e| {
                    json!({"undecodable": {"error": format!("the first watch's reply: {e}"),
                                           "bytes": crate::normalize::normalize_bytes(&bytes)}})
                })?;
                self.base = reply
                    .commit_infos
                    .iter()
                    .map(|c| c.commit_index)
                    .max()
                    .unwrap_or(0)
                    .max(reply.log_index);
                self.last = self.base;
                self.state = State::Open { tx, inbound };
                Ok(())
            }
        }
    }

    fn end_late(&mut self) -> Json {
        self.state = State::Ended("an earlier answer timed out".into());
        no_answer(format!(
            "no answer within {} s",
            self.client.timeout().as_secs()
        ))
    }

    fn end_status(&mut self, status: &Status) -> Json {
        self.state = State::Ended(format!(
            "the stream had ended (status {})",
            common::grpc::grpc_code_name(status.code())
        ));
        ratis_status_answer(status, &self.names)
    }

    /// The next reply; `watched` is the index a watch waited for.
    async fn receive(&mut self, watched: Option<u64>) -> Json {
        let timeout = self.client.timeout();
        let State::Open { inbound, .. } = &mut self.state else {
            return no_answer("the stream is not open");
        };
        match tokio::time::timeout(timeout, inbound.message()).await {
            Err(_) => self.end_late(),
            Ok(Err(status)) => self.end_status(&status),
            Ok(Ok(None)) => {
                self.state = State::Ended("the stream had ended".into());
                no_answer("the stream ended without an answer")
            }
            Ok(Ok(Some(bytes))) => match RaftClientReplyProto::decode(&bytes[..]) {
                Ok(reply) => {
                    if watched.is_none() {
                        self.last = self.last.max(reply.log_index);
                    }
                    let indexes = Indexes {
                        base: self.base,
                        last: self.last,
                        watched,
                    };
                    json!({"raft_reply": render_reply(&reply, &self.names, &indexes)})
                }
                Err(e) => json!({"undecodable": {
                    "error": e.to_string(),
                    "bytes": crate::normalize::normalize_bytes(&bytes),
                }}),
            },
        }
    }
}

/// A status that ended a Ratis stream, with the Ratis exception its `exception-type` names. A
/// message that starts with a stream's number (`OrderedRequestStreamObserver`'s "12: The group
/// …") shows it as `<stream>`: it counts the target's streams since it started; the target's
/// own group, as Ratis prints it (`group-` and 12 hex digits), is `group-$PIPELINE`.
pub fn ratis_status_answer(status: &Status, names: &Names) -> Json {
    let mut answer = status_answer(status);
    let mut message = status.message().to_string();
    if let Some((number, rest)) = message.split_once(": ")
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit())
    {
        message = format!("<stream>: {rest}");
    }
    let own = names.pipeline.simple().to_string().to_uppercase();
    message = message.replace(&format!("group-{}", &own[20..]), "group-$PIPELINE");
    answer["status"]["message"] = Json::String(message);
    if let Some(class) = status
        .metadata()
        .get(common::ratis::EXCEPTION_TYPE_KEY)
        .and_then(|v| v.to_str().ok())
    {
        answer["status"]["exceptionType"] = Json::String(class.to_string());
    }
    answer
}

/// An index relative to the base: `"$BASE+k"` (`"$BASE-k"` below it); 0 stays 0 (none).
pub fn relative(index: u64, base: u64) -> Json {
    if index == 0 {
        json!(0)
    } else if index >= base {
        json!(format!("$BASE+{}", index - base))
    } else {
        json!(format!("$BASE-{}", base - index))
    }
}

/// A peer id (the DataNode UUID's bytes): `$DN` when it is this target's.
fn peer_id(id: &[u8], names: &Names) -> Json {
    match std::str::from_utf8(id) {
        Ok(s) if s == names.datanode_uuid => json!("$DN"),
        Ok(s) => json!(s),
        Err(_) => crate::normalize::normalize_bytes(id),
    }
}

fn group_id(id: &[u8], names: &Names) -> Json {
    match common::ratis::id_from_bytes(id) {
        Some(g) if g == names.pipeline => json!("$PIPELINE"),
        Some(g) if g == other_group() => json!("$OTHER_GROUP"),
        Some(g) => json!(g.to_string()),
        None => crate::normalize::normalize_bytes(id),
    }
}

/// A Java-serialized `StackTraceElement[]` (it starts with the stream magic `AC ED`) is shown as
/// such: its frames are the implementation's, not the protocol's.
fn stack_trace(bytes: &[u8]) -> Json {
    if bytes.is_empty() {
        json!("")
    } else if bytes.starts_with(&[0xac, 0xed]) {
        json!("<java StackTraceElement[]>")
    } else {
        crate::normalize::normalize_bytes(bytes)
    }
}

/// What a reply's indexes are shown against.
struct Indexes {
    /// The commit index when the stream opened.
    base: u64,
    /// The highest log index the stream has seen, this reply's included (at least `base`).
    last: u64,
    /// The index a watch waited for (a watch's reply).
    watched: Option<u64>,
}

/// A commit index, or a watch's log index, that has reached `target`: `"covers"`. How far past
/// is timing: a real DataNode's commit index runs one past a write (the metadata entry that
/// records the commit), or not yet, as the reply races the entry's flush. One behind `target`
/// is shown relative to the base.
fn reached(index: u64, target: u64, base: u64) -> Json {
    if index >= target {
        json!("covers")
    } else {
        relative(index, base)
    }
}

fn render_reply(reply: &RaftClientReplyProto, names: &Names, at: &Indexes) -> Json {
    let base = at.base;
    let mut out = Map::new();
    if let Some(rpc) = &reply.rpc_reply {
        let client = common::ratis::id_from_bytes(&rpc.requestor_id);
        out.insert(
            "requestorId".into(),
            if client == Some(names.client_id) {
                json!("$CLIENT")
            } else {
                crate::normalize::normalize_bytes(&rpc.requestor_id)
            },
        );
        out.insert("replyId".into(), peer_id(&rpc.reply_id, names));
        if let Some(g) = &rpc.raft_group_id {
            out.insert("group".into(), group_id(&g.id, names));
        }
        out.insert("callId".into(), json!(rpc.call_id));
        out.insert("success".into(), json!(rpc.success));
    }
    if let Some(m) = &reply.message
        && !m.content.is_empty()
    {
        // A container command's answer, or bytes that are none.
        let answer = message_answer(&m.content);
        out.insert("message".into(), answer);
    }
    if let Some(e) = &reply.exception_details {
        out.insert("exception".into(), exception(e, names));
    }
    let log_index = match at.watched {
        Some(watched) => reached(reply.log_index, watched, base),
        None => relative(reply.log_index, base),
    };
    out.insert("logIndex".into(), log_index);
    let commits: Vec<Json> = reply
        .commit_infos
        .iter()
        .map(|c| {
            json!({
                "server": c.server.as_ref().map_or(json!(null), |s| peer_id(&s.id, names)),
                "commitIndex": reached(c.commit_index, at.last, base),
            })
        })
        .collect();
    out.insert("commitInfos".into(), Json::Array(commits));
    Json::Object(out)
}

fn exception(e: &ExceptionDetails, names: &Names) -> Json {
    let thrown = |kind: &str, class: &str, message: &str, trace: &[u8]| json!({"kind": kind, "class": class, "message": message, "stacktrace": stack_trace(trace)});
    match e {
        ExceptionDetails::StateMachineException(x) => thrown(
            "stateMachineException",
            &x.exception_class_name,
            &x.error_msg,
            &x.stacktrace,
        ),
        ExceptionDetails::AlreadyClosedException(x) => thrown(
            "alreadyClosedException",
            &x.exception_class_name,
            &x.error_msg,
            &x.stacktrace,
        ),
        ExceptionDetails::NotLeaderException(x) => json!({
            "kind": "notLeaderException",
            "suggestedLeader": x.suggested_leader.as_ref().map_or(json!(null), |p| peer_id(&p.id, names)),
            "peers": x.peers_in_conf.len(),
        }),
        ExceptionDetails::NotReplicatedException(x) => json!({
            "kind": "notReplicatedException",
            "callId": x.call_id,
            "replication": x.replication,
        }),
        ExceptionDetails::LeaderNotReadyException(_) => json!({"kind": "leaderNotReadyException"}),
        ExceptionDetails::DataStreamException(t)
        | ExceptionDetails::LeaderSteppingDownException(t)
        | ExceptionDetails::TransferLeadershipException(t)
        | ExceptionDetails::ReadException(t)
        | ExceptionDetails::ReadIndexException(t) => {
            let kind = match e {
                ExceptionDetails::DataStreamException(_) => "dataStreamException",
                ExceptionDetails::LeaderSteppingDownException(_) => "leaderSteppingDownException",
                ExceptionDetails::TransferLeadershipException(_) => "transferLeadershipException",
                ExceptionDetails::ReadException(_) => "readException",
                _ => "readIndexException",
            };
            thrown(kind, &t.class_name, &t.error_message, &t.stack_trace)
        }
    }
}

/// In a `ratis` scenario, every `blockCommitSequenceId` of an answer (a PutBlock's, a later
/// GetBlock's over gRPC) is a log index: shown relative to the base, as the reply's own.
pub fn relative_bcs_ids(answer: &mut Json, base: u64) {
    match answer {
        Json::Object(map) => {
            for (key, value) in map.iter_mut() {
                if key == "blockCommitSequenceId" {
                    let index = match value {
                        Json::String(s) => s.parse::<u64>().ok(),
                        Json::Number(n) => n.as_u64(),
                        _ => None,
                    };
                    if let Some(index) = index {
                        *value = relative(index, base);
                    }
                } else {
                    relative_bcs_ids(value, base);
                }
            }
        }
        Json::Array(items) => items.iter_mut().for_each(|v| relative_bcs_ids(v, base)),
        _ => {}
    }
}
