//! One Hadoop RPC connection to SCM over TCP: `common::hrpc`'s frames on a socket, one call at a
//! time (a DataNode's endpoint task waits for each answer before the next call, as Ozone's does).
//! What the server sends is read in pieces of at most [`READ_PIECE`] bytes up to the frame's
//! announced length, so a hostile length costs nothing until its bytes actually arrive, and never
//! more than the maximum response length.

use bytes::{Bytes, BytesMut};
use common::hrpc::{self, HrpcError};
use prost::Message;
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Read buffer growth step.
pub const READ_PIECE: usize = 64 << 10;

/// What a call can end with besides an answer.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error(transparent)]
    Protocol(#[from] HrpcError),
    #[error("the response message does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
    #[error("the answer is for call {got}, not {expected}")]
    CallIdMismatch { expected: i32, got: u32 },
    #[error("the answer names another client")]
    ClientIdMismatch,
}

impl RpcError {
    /// Whether the connection is still usable after this error (a remote ERROR is; anything
    /// else leaves the stream in an unknown place).
    pub fn connection_usable(&self) -> bool {
        matches!(
            self,
            RpcError::Protocol(HrpcError::Remote { fatal: false, .. })
        )
    }
}

/// A connection for one protocol.
pub struct RpcConnection {
    stream: TcpStream,
    client_id: Bytes,
    protocol: &'static str,
    protocol_version: u64,
    next_call_id: i32,
    first_response: bool,
    max_response: usize,
    out: BytesMut,
}

impl RpcConnection {
    /// Connects, then sends the connection header and context (answered by nothing: the first
    /// call's answer tells whether they were accepted).
    pub async fn connect(
        addr: &str,
        protocol: &'static str,
        protocol_version: u64,
        user: &str,
        timeout: Duration,
    ) -> Result<Self, RpcError> {
        let connect = async {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            Ok::<_, std::io::Error>(stream)
        };
        let stream = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => {
                return Err(RpcError::Connect {
                    addr: addr.to_owned(),
                    source,
                });
            }
            Err(_) => {
                return Err(RpcError::Connect {
                    addr: addr.to_owned(),
                    source: std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"),
                });
            }
        };
        let client_id = Bytes::copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        let mut conn = Self {
            stream,
            client_id,
            protocol,
            protocol_version,
            next_call_id: 0,
            first_response: true,
            max_response: hrpc::DEFAULT_MAX_RESPONSE_LENGTH,
            out: BytesMut::with_capacity(1024),
        };
        conn.out.extend_from_slice(&hrpc::connection_header(0));
        hrpc::encode_connection_context(&conn.client_id, protocol, user, &mut conn.out);
        // Sent with the first call, as Hadoop's client does (no flush before it).
        Ok(conn)
    }

    /// The largest response frame accepted (`ipc.maximum.response.length`).
    pub fn set_max_response(&mut self, bytes: usize) {
        self.max_response = bytes;
    }

    /// One call: sends `request` to `method` and decodes the answer as `R`, within `timeout`.
    pub async fn call<R: Message + Default>(
        &mut self,
        method: &str,
        request: &impl Message,
        timeout: Duration,
    ) -> Result<R, RpcError> {
        let call_id = self.next_call_id;
        // Call ids wrap to 0 past i32::MAX, as Hadoop's (`Client.nextCallId`).
        self.next_call_id = self.next_call_id.checked_add(1).unwrap_or(0);
        let call = hrpc::Call {
            call_id,
            retry_count: 0,
            client_id: &self.client_id,
            method,
            protocol: self.protocol,
            protocol_version: self.protocol_version,
        };
        hrpc::encode_call(&call, request, &mut self.out);
        let exchange = async {
            self.stream.write_all(&self.out).await?;
            self.out.clear();
            let frame = self.read_frame().await?;
            let response = hrpc::parse_response(frame)?;
            if response.header.call_id != call_id as u32 {
                return Err(RpcError::CallIdMismatch {
                    expected: call_id,
                    got: response.header.call_id,
                });
            }
            if let Some(id) = &response.header.client_id
                && !id.is_empty()
                && *id != self.client_id
            {
                return Err(RpcError::ClientIdMismatch);
            }
            Ok(R::decode(response.body)?)
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(RpcError::Timeout(timeout)),
        }
    }

    /// Reads one response frame: the 4-byte length (checked), then that many bytes, growing the
    /// buffer only as they arrive.
    async fn read_frame(&mut self) -> Result<Bytes, RpcError> {
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix).await?;
        let first = std::mem::replace(&mut self.first_response, false);
        let length = hrpc::response_length(prefix, self.max_response, first)?;
        let mut buf = BytesMut::with_capacity(length.min(READ_PIECE));
        while buf.len() < length {
            let want = (length - buf.len()).min(READ_PIECE);
            buf.reserve(want);
            let n = (&mut self.stream)
                .take(want as u64)
                .read_buf(&mut buf)
                .await?;
            if n == 0 {
                return Err(RpcError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
        Ok(buf.freeze())
    }
}
