//! A hostile HTTP/2 server against loadgen's own client (loadgen/src/connection/http2.rs), through
//! its public API: `Connection::connect` to a loopback listener whose side of the connection is
//! the fuzz input, then 1–8 concurrent `exchange`s. The frame parser, SETTINGS, flow control,
//! HPACK (loona-hpack), CONTINUATION, RST_STREAM, GOAWAY and PING handling all see the server's
//! bytes. Nothing may panic; every exchange must end once the server has closed its side (no
//! hang: a stream still waiting 5 s after the server's FIN is a bug); memory is bounded by
//! libFuzzer's `-rss_limit_mb`/`-malloc_limit_mb` (scripts/fuzz.sh).
//!
//! Input: byte 0 = options, the rest = what the server sends.
//! - bits 0–2: number of exchanges − 1;
//! - bit 3: the first request is 100 KiB (beyond the default 65,535-byte windows: it waits for
//!   WINDOW_UPDATE or a larger INITIAL_WINDOW_SIZE);
//! - bit 4: the server starts with a valid empty SETTINGS frame (else the input must);
//! - bits 5–7: the server writes the rest in pieces of 1, 7, 9, 64, 512, 4096 or 100 bytes, or at
//!   once (0), with the client running in between (frames split across reads).
//!
//! The server sends its first frame (the SETTINGS the client waits for), waits until the client
//! has opened its streams, then sends the rest and closes its side (FIN), and reads until the
//! client closes.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use loadgen::connection::http2::Connection;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const PATH: &str = "/hadoop.hdds.datanode.XceiverClientProtocolService/send";
const EMPTY_SETTINGS: [u8; 9] = [0, 0, 0, 0x4, 0, 0, 0, 0, 0];
const PIECES: [usize; 8] = [usize::MAX, 1, 7, 9, 64, 512, 4096, 100];
/// How long anything may take once the server has said everything (a loopback connection).
const PATIENCE: Duration = Duration::from_secs(5);

fn runtime() -> &'static tokio::runtime::Runtime {
    thread_local! {
        static RT: &'static tokio::runtime::Runtime = Box::leak(Box::new(
            tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(),
        ));
    }
    RT.with(|rt| *rt)
}

/// A gRPC-framed request message of `len` bytes.
fn grpc_frame(len: usize) -> Bytes {
    let mut f = Vec::with_capacity(5 + len);
    f.push(0);
    f.extend_from_slice(&(len as u32).to_be_bytes());
    f.resize(5 + len, b'x');
    f.into()
}

async fn run(listener: &TcpListener, data: &[u8]) {
    let Some((&options, rest)) = data.split_first() else {
        return;
    };
    let calls = usize::from(options & 0x7) + 1;
    let large = options & 0x8 != 0;
    let piece = PIECES[usize::from(options >> 5)];
    // The handshake part: what the client reads before `connect` returns. When the input does
    // not start with a whole frame, the client never gets past `connect` and the server sends
    // everything at once.
    let (first, rest, wait): (Vec<u8>, &[u8], bool) = if options & 0x10 != 0 {
        (EMPTY_SETTINGS.to_vec(), rest, true)
    } else {
        let whole = rest.len() >= 9
            && 9 + ((usize::from(rest[0]) << 16)
                | (usize::from(rest[1]) << 8)
                | usize::from(rest[2]))
                <= rest.len();
        if whole {
            let end = 9
                + ((usize::from(rest[0]) << 16)
                    | (usize::from(rest[1]) << 8)
                    | usize::from(rest[2]));
            (rest[..end].to_vec(), &rest[end..], true)
        } else {
            (rest.to_vec(), &[][..], false)
        }
    };
    let rest = rest.to_vec();
    let addr = listener.local_addr().unwrap().to_string();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();

    let server = async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let _ = tcp.set_nodelay(true);
        if tcp.write_all(&first).await.is_ok() {
            // Wait until the client has opened its streams (or gave up).
            if wait {
                let _ = go_rx.await;
            }
            for p in rest.chunks(piece.max(1)) {
                if tcp.write_all(p).await.is_err() {
                    break;
                }
                if piece != usize::MAX {
                    tokio::task::yield_now().await;
                    tokio::task::yield_now().await;
                }
            }
        }
        let _ = tcp.shutdown().await;
        // Read until the client closes, so that our close is not a reset losing its last bytes.
        let mut sink = vec![0u8; 64 * 1024];
        let drained = tokio::time::timeout(PATIENCE, async {
            while let Ok(n) = tcp.read(&mut sink).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await;
        #[allow(deprecated)]
        let _ = tcp.set_linger(Some(Duration::ZERO)); // no TIME_WAIT pile-up over millions of runs
        drained.is_ok()
    };

    let client = async move {
        let conn = Connection::connect(&addr, &addr, PATH, "10S", PATIENCE).await;
        let Ok(conn) = conn else {
            let _ = go_tx.send(());
            return true; // refused at the handshake: fine
        };
        let mut handles = Vec::new();
        for i in 0..calls {
            let c = Rc::clone(&conn);
            let frame = grpc_frame(if i == 0 && large { 100 << 10 } else { 10 + i });
            handles.push(tokio::task::spawn_local(async move {
                c.exchange(frame, BytesMut::new()).await
            }));
        }
        // Let the exchanges open their streams and the connection task write them.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        let _ = go_tx.send(());
        let ended = tokio::time::timeout(PATIENCE * 2, async {
            for h in handles {
                match h.await.expect("an exchange panicked") {
                    Ok(resp) => assert!(resp.body.len() <= 5 + common::MAX_MESSAGE_SIZE),
                    Err((_error, _body)) => {}
                }
            }
        })
        .await;
        assert!(
            ended.is_ok(),
            "an exchange did not end after the server closed the connection"
        );
        assert!(
            conn.is_usable() || conn.closed_reason().is_some(),
            "a closed connection has a reason"
        );
        drop(conn);
        true
    };

    let (server_ok, _) = tokio::join!(server, client);
    assert!(
        server_ok,
        "the client kept the connection open after the server closed its side"
    );
}

fuzz_target!(|data: &[u8]| {
    let rt = runtime();
    thread_local! {
        static LISTENER: &'static TcpListener = Box::leak(Box::new(
            runtime().block_on(TcpListener::bind("127.0.0.1:0")).unwrap(),
        ));
    }
    let listener = LISTENER.with(|l| *l);
    let local = tokio::task::LocalSet::new();
    local.block_on(rt, run(listener, data));
});
