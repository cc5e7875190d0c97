//! The connection against real and scripted peers: the `h2` crate's server with tight settings
//! (two concurrent streams, 1,000-byte windows, 16 KiB frames — requests must wait for room and
//! for window updates), and scripted servers whose frames break RFC 9113.

use super::*;
use bytes::Bytes;
use common::http2::flags::ACK;
use common::http2::frame_type::{GOAWAY, RST_STREAM, SETTINGS};
use common::http2::{FrameHeader, PREFACE, encode, setting};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Server {
    addr: String,
    max_seen: Arc<AtomicUsize>,
}

/// FNV-1a of a request body, as the test server answers it.
fn fnv(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Answers each request with its body length and FNV-1a hash (each 4 bytes, big-endian) in a
/// DATA frame and
/// `grpc-status: 0` trailers; a body starting with `s` is answered after 300 ms, one
/// starting with `g` makes the server send GOAWAY instead of answering.
async fn server() -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let max_seen = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&max_seen);
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut conn = h2::server::Builder::new()
            .max_concurrent_streams(2)
            .initial_window_size(1000)
            .handshake::<_, Bytes>(tcp)
            .await
            .unwrap();
        let open = Arc::new(AtomicUsize::new(0));
        let (goaway_tx, mut goaway_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        loop {
            // The accept loop drives the connection; each request runs on its own task.
            let (req, mut respond) = tokio::select! {
                next = conn.accept() => match next {
                    Some(Ok(r)) => r,
                    _ => break,
                },
                Some(()) = goaway_rx.recv() => {
                    conn.graceful_shutdown();
                    continue;
                }
            };
            let now = open.fetch_add(1, Ordering::SeqCst) + 1;
            seen.fetch_max(now, Ordering::SeqCst);
            let open = Arc::clone(&open);
            let goaway = goaway_tx.clone();
            tokio::spawn(async move {
                let mut body = req.into_body();
                let mut got = Vec::new();
                while let Some(chunk) = body.data().await {
                    let chunk = chunk.unwrap();
                    let _ = body.flow_control().release_capacity(chunk.len());
                    got.extend_from_slice(&chunk);
                }
                if got.first() == Some(&b'g') {
                    let _ = goaway.send(());
                    open.fetch_sub(1, Ordering::SeqCst);
                    return;
                }
                if got.first() == Some(&b's') {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                let response = http::Response::builder()
                    .status(200)
                    .header("content-type", "application/grpc")
                    .body(())
                    .unwrap();
                if let Ok(mut send) = respond.send_response(response, false) {
                    let mut answer = (got.len() as u32).to_be_bytes().to_vec();
                    answer.extend_from_slice(&fnv(&got).to_be_bytes());
                    let _ = send.send_data(Bytes::from(answer), false);
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                    let _ = send.send_trailers(trailers);
                }
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    Server { addr, max_seen }
}

async fn connect(addr: &str) -> Rc<Connection> {
    Connection::connect(addr, addr, "/t", "1000m", Duration::from_secs(5))
        .await
        .unwrap()
}

fn length_of(r: &Response) -> u32 {
    u32::from_be_bytes(r.body[..4].try_into().unwrap())
}

#[tokio::test]
async fn large_requests_wait_for_windows_and_streams_for_room() {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let srv = server().await;
            let conn = connect(&srv.addr).await;
            let mut calls = Vec::new();
            for i in 0..12usize {
                let c = Rc::clone(&conn);
                // 0 B … 220 KiB: many frames, far beyond the 1,000-byte windows.
                let body = Bytes::from(vec![b'x'; i * 20 * 1024]);
                calls.push(tokio::task::spawn_local(async move {
                    (i, c.exchange(body, BytesMut::new()).await)
                }));
            }
            for call in calls {
                let (i, r) = call.await.unwrap();
                let r = r.map_err(|(e, _)| e).unwrap();
                assert_eq!(r.head.http_status, 200);
                assert_eq!(r.head.grpc_status, Some(0));
                assert_eq!(length_of(&r) as usize, i * 20 * 1024);
            }
            assert!(srv.max_seen.load(Ordering::SeqCst) <= 2);
            assert!(conn.is_usable());
        })
        .await;
}

#[tokio::test]
async fn segmented_bodies_arrive_whole_and_in_order() {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let srv = server().await;
            let conn = connect(&srv.addr).await;
            let mut calls = Vec::new();
            for i in 0..6usize {
                let c = Rc::clone(&conn);
                // A small head, a large middle (copied into no buffer), a small tail; sizes
                // that put frame boundaries inside and across the segments.
                let head = Bytes::from(vec![b'h' ^ i as u8; 7 + i * 3000]);
                let data: Vec<u8> = (0..(i * 37_000 + 1)).map(|k| (k % 251) as u8).collect();
                let tail = Bytes::from(vec![b't'; i * 5]);
                let body = RequestBody::new(head, Bytes::from(data), tail);
                let expected = (body.len(), fnv(&body.to_vec()));
                calls.push(tokio::task::spawn_local(async move {
                    (expected, c.exchange(body, BytesMut::new()).await)
                }));
            }
            for call in calls {
                let ((len, hash), r) = call.await.unwrap();
                let r = r.map_err(|(e, _)| e).unwrap();
                assert_eq!(r.head.grpc_status, Some(0));
                assert_eq!(length_of(&r) as usize, len);
                assert_eq!(u32::from_be_bytes(r.body[4..8].try_into().unwrap()), hash);
            }
        })
        .await;
}

#[tokio::test]
async fn a_dropped_call_resets_its_stream_and_the_connection_goes_on() {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let srv = server().await;
            let conn = connect(&srv.addr).await;
            let slow = conn.exchange(Bytes::from_static(b"slow"), BytesMut::new());
            assert!(
                tokio::time::timeout(Duration::from_millis(50), slow)
                    .await
                    .is_err()
            );
            for _ in 0..5 {
                let r = conn
                    .exchange(Bytes::from_static(b"fast"), BytesMut::new())
                    .await
                    .map_err(|(e, _)| e)
                    .unwrap();
                assert_eq!(length_of(&r), 4);
            }
        })
        .await;
}

#[tokio::test]
async fn goaway_closes_the_connection_for_new_streams() {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let srv = server().await;
            let conn = connect(&srv.addr).await;
            let r = conn
                .exchange(Bytes::from_static(b"go away"), BytesMut::new())
                .await;
            assert!(r.is_err(), "the stream was never answered");
            // The stream's reset may come before the GOAWAY: wait for the GOAWAY.
            for _ in 0..200 {
                if !conn.is_usable() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(!conn.is_usable());
            let why = conn.closed_reason().unwrap();
            assert!(why.contains("GOAWAY"), "{why}");
            let again = conn
                .exchange(Bytes::from_static(b"x"), BytesMut::new())
                .await;
            assert!(matches!(again, Err((StreamError::Transport(_), _))));
        })
        .await;
}

/// A server that sends its SETTINGS, reads the client's first request, then writes `script`
/// and returns all the client sent after its preface (until the client closes or 2 s pass).
async fn scripted(script: Vec<u8>) -> (String, tokio::task::JoinHandle<Vec<u8>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut hello = Vec::new();
        encode::settings(&mut hello, &[]);
        tcp.write_all(&hello).await.unwrap();
        // Everything the client sends, from its preface on, so that frames are parsed
        // from a frame boundary.
        let mut all = vec![0u8; 256 * 1024];
        let mut got = tcp.read(&mut all).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        got += tcp.read(&mut all[got..]).await.unwrap_or(0);
        all.truncate(got);
        tcp.write_all(&script).await.unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(2), tcp.read_to_end(&mut all)).await;
        all.split_off(PREFACE.len())
    });
    (addr, server)
}

/// The frames in `bytes` as (type, stream, first 4 payload bytes as a code).
fn frames_of(bytes: &[u8]) -> Vec<(u8, u32, u32)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(h) = FrameHeader::from_prefix(&bytes[at..]) {
        if at + h.frame_len() > bytes.len() {
            break;
        }
        let p = &bytes[at + 9..at + h.frame_len()];
        let code_at = if h.kind() == GOAWAY { 4 } else { 0 };
        let code = p
            .get(code_at..code_at + 4)
            .map_or(0, |c| u32::from_be_bytes(c.try_into().unwrap()));
        out.push((h.kind(), h.stream_id(), code));
        at += h.frame_len();
    }
    out
}

/// Runs one exchange (a body of 100 KiB, beyond the default window, so that it waits for
/// window) against `script`; the exchange's result and what the client sent after.
async fn exchange_against(script: Vec<u8>) -> (Result<Response, StreamError>, Vec<(u8, u32, u32)>) {
    let (addr, server) = scripted(script).await;
    let local = tokio::task::LocalSet::new();
    let result = local
        .run_until(async {
            let conn = connect(&addr).await;
            let r = tokio::time::timeout(
                Duration::from_secs(5),
                conn.exchange(Bytes::from(vec![b'x'; 100 << 10]), BytesMut::new()),
            )
            .await
            .expect("the exchange ended");
            drop(conn);
            r.map_err(|(e, _)| e)
        })
        .await;
    (result, frames_of(&server.await.unwrap()))
}

fn window_update(stream: u32, inc: u32) -> Vec<u8> {
    let mut b = Vec::new();
    encode::window_update(&mut b, stream, inc);
    b
}

use common::http2::error_code::{FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, PROTOCOL_ERROR};

#[tokio::test]
async fn a_zero_stream_window_increment_resets_that_stream_as_a_protocol_error() {
    let (r, sent) = exchange_against(window_update(1, 0)).await;
    assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
    assert!(sent.contains(&(RST_STREAM, 1, PROTOCOL_ERROR)), "{sent:?}");
    assert!(!sent.iter().any(|f| f.0 == GOAWAY), "{sent:?}");
}

#[tokio::test]
async fn a_zero_connection_window_increment_is_a_connection_error() {
    let (r, sent) = exchange_against(window_update(0, 0)).await;
    assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
    assert!(sent.contains(&(GOAWAY, 0, PROTOCOL_ERROR)), "{sent:?}");
}

#[tokio::test]
async fn windows_past_2_31_minus_1_are_flow_control_errors() {
    // The 100 KiB request used both default windows up (0 left): the second increment of
    // 2^31-1 overflows whatever the first let the client send.
    let twice = |stream| {
        [
            window_update(stream, MAX_WINDOW_INC),
            window_update(stream, MAX_WINDOW_INC),
        ]
        .concat()
    };
    let (r, sent) = exchange_against(twice(1)).await;
    assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
    assert!(
        sent.contains(&(RST_STREAM, 1, FLOW_CONTROL_ERROR)),
        "{sent:?}"
    );
    let (r, sent) = exchange_against(twice(0)).await;
    assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
    assert!(sent.contains(&(GOAWAY, 0, FLOW_CONTROL_ERROR)), "{sent:?}");
}

const MAX_WINDOW_INC: u32 = common::http2::MAX_WINDOW;

#[tokio::test]
async fn settings_that_overflow_windows_or_have_bad_lengths_are_connection_errors() {
    let settings = |p: &[(u16, u32)]| {
        let mut b = Vec::new();
        encode::settings(&mut b, p);
        b
    };
    // Above 2^31-1 (§6.5.2).
    let (r, sent) = exchange_against(settings(&[(setting::INITIAL_WINDOW_SIZE, 1 << 31)])).await;
    assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
    assert!(sent.contains(&(GOAWAY, 0, FLOW_CONTROL_ERROR)), "{sent:?}");
    // The open stream's window grown past 2^31-1 by the change (§6.9.2).
    let mut script = window_update(1, MAX_WINDOW_INC);
    script.extend(settings(&[(setting::INITIAL_WINDOW_SIZE, 65_536)]));
    let (r, sent) = exchange_against(script).await;
    assert!(matches!(r, Err(StreamError::Protocol(_))), "{r:?}");
    assert!(sent.contains(&(GOAWAY, 0, FLOW_CONTROL_ERROR)), "{sent:?}");
    // An ACK with a payload, a length not a multiple of 6 (§6.5).
    let mut ack = Vec::new();
    encode::frame(&mut ack, SETTINGS, ACK, 0, &[0; 6]);
    let (_, sent) = exchange_against(ack).await;
    assert!(sent.contains(&(GOAWAY, 0, FRAME_SIZE_ERROR)), "{sent:?}");
    let mut odd = Vec::new();
    encode::frame(&mut odd, SETTINGS, 0, 0, &[0; 7]);
    let (_, sent) = exchange_against(odd).await;
    assert!(sent.contains(&(GOAWAY, 0, FRAME_SIZE_ERROR)), "{sent:?}");
}

#[tokio::test]
async fn an_answer_without_grpc_status_is_a_protocol_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut conn = h2::server::handshake(tcp).await.unwrap();
        while let Some(Ok((_req, mut respond))) = conn.accept().await {
            let response = http::Response::builder()
                .status(200)
                .header("content-type", "application/grpc")
                .body(())
                .unwrap();
            let mut send = respond.send_response(response, false).unwrap();
            let _ = send.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
            let mut trailers = http::HeaderMap::new();
            trailers.insert("x-other", http::HeaderValue::from_static("1"));
            let _ = send.send_trailers(trailers);
        }
    });
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let conn = connect(&addr).await;
            let r = conn
                .exchange(Bytes::from_static(b"x"), BytesMut::new())
                .await;
            assert!(matches!(r, Err((StreamError::Protocol(_), _))), "{r:?}");
            // A stream-level failure: the connection goes on.
            assert!(conn.is_usable());
        })
        .await;
}

#[tokio::test]
async fn a_server_that_is_not_http2_is_refused_at_connect() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        use tokio::io::AsyncWriteExt;
        let _ = tcp.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
    });
    let local = tokio::task::LocalSet::new();
    let err = local
        .run_until(Connection::connect(
            &addr,
            &addr,
            "/t",
            "1000m",
            Duration::from_secs(5),
        ))
        .await
        .err()
        .unwrap();
    assert!(err.contains("SETTINGS") || err.contains("closed"), "{err}");
}

#[test]
fn error_codes_have_names() {
    assert_eq!(error_code_name(7), "REFUSED_STREAM");
    assert_eq!(error_code_name(99), "error code 99");
}
