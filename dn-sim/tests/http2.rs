//! The HTTP/2 receive settings dn-sim advertises (`dn_sim::server::STREAM_WINDOW`,
//! `CONNECTION_WINDOW`, `MAX_FRAME_SIZE`), read off the wire by a raw client: its SETTINGS frame
//! and the connection-level WINDOW_UPDATE that follows it.

use dn_sim::Config;
use dn_sim::server::{CONNECTION_WINDOW, MAX_FRAME_SIZE, STREAM_WINDOW};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: u8 = 0x4;
const WINDOW_UPDATE: u8 = 0x8;

/// One frame: (type, flags, stream id, payload).
async fn frame(io: &mut TcpStream) -> (u8, u8, u32, Vec<u8>) {
    let mut head = [0u8; 9];
    io.read_exact(&mut head).await.unwrap();
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    io.read_exact(&mut payload).await.unwrap();
    (head[3], head[4], stream, payload)
}

#[tokio::test]
async fn advertises_large_windows_and_1_mib_frames() {
    let server = dn_sim::start(Config::loopback()).await.unwrap();
    let mut io = TcpStream::connect(server.local_addr()).await.unwrap();
    // The preface and an empty SETTINGS frame.
    io.write_all(PREFACE).await.unwrap();
    io.write_all(&[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0])
        .await
        .unwrap();

    let mut settings = None;
    let mut connection_increment = None;
    tokio::time::timeout(Duration::from_secs(5), async {
        while settings.is_none() || connection_increment.is_none() {
            let (kind, flags, stream, payload) = frame(&mut io).await;
            match kind {
                SETTINGS if flags & 0x1 == 0 => {
                    let params: Vec<(u16, u32)> = payload
                        .chunks_exact(6)
                        .map(|p| {
                            (
                                u16::from_be_bytes([p[0], p[1]]),
                                u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
                            )
                        })
                        .collect();
                    settings = Some(params);
                }
                WINDOW_UPDATE if stream == 0 => {
                    connection_increment = Some(
                        u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                            & 0x7fff_ffff,
                    );
                }
                _ => {}
            }
        }
    })
    .await
    .expect("the server's SETTINGS and connection WINDOW_UPDATE");

    let settings = settings.unwrap();
    let value = |id: u16| settings.iter().find(|(k, _)| *k == id).map(|(_, v)| *v);
    assert_eq!(value(0x4), Some(STREAM_WINDOW), "INITIAL_WINDOW_SIZE");
    assert_eq!(value(0x5), Some(MAX_FRAME_SIZE), "MAX_FRAME_SIZE");
    // The connection window starts at 65,535 and is raised by one WINDOW_UPDATE.
    assert_eq!(connection_increment, Some(CONNECTION_WINDOW - 65_535));
    drop(io);
    assert!(server.shutdown().await, "shut down within the grace period");
}

// Room for a whole 4 MB WriteChunk (plus its envelope) on one stream and four streams' worth per
// connection; a frame size HTTP/2 allows (2^14..2^24-1).
const _: () = assert!(STREAM_WINDOW > 4 << 20 && CONNECTION_WINDOW >= 4 * STREAM_WINDOW);
const _: () = assert!(MAX_FRAME_SIZE >= 1 << 14 && MAX_FRAME_SIZE < 1 << 24);
