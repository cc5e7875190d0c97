//! The HTTP/2 receive settings dn-sim advertises (by default `dn_sim::net::connection::STREAM_WINDOW`,
//! `CONNECTION_WINDOW`, `MAX_FRAME_SIZE`; or what `--http2-stream-window`,
//! `--http2-connection-window` and `--http2-max-frame-size` say), read off the wire by a raw
//! client: its SETTINGS frame and the connection-level WINDOW_UPDATE that follows it.

use clap::Parser;
use dn_sim::Config;
use dn_sim::net::connection::{CONNECTION_WINDOW, MAX_FRAME_SIZE, STREAM_WINDOW};
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

/// The server's (INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, connection window) as a client sees them.
async fn advertised(config: Config) -> (Option<u32>, Option<u32>, u32) {
    let server = dn_sim::start(config).await.unwrap();
    let mut io = TcpStream::connect(server.local_addr()).await.unwrap();
    // The preface and an empty SETTINGS frame.
    io.write_all(PREFACE).await.unwrap();
    io.write_all(&[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0])
        .await
        .unwrap();

    let mut settings = None;
    let mut connection_increment = None;
    // With a connection window of 65,535 or less the server sends no WINDOW_UPDATE: wait for one
    // only a short while after SETTINGS.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while settings.is_none() || connection_increment.is_none() {
            let next = if settings.is_some() {
                match tokio::time::timeout(Duration::from_millis(500), frame(&mut io)).await {
                    Ok(f) => f,
                    Err(_) => break,
                }
            } else {
                frame(&mut io).await
            };
            let (kind, flags, stream, payload) = next;
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
    .await;
    let settings = settings.expect("the server's SETTINGS");
    let value = |id: u16| settings.iter().find(|(k, _)| *k == id).map(|(_, v)| *v);
    drop(io);
    assert!(server.shutdown().await, "shut down within the grace period");
    // The connection window starts at 65,535 and is raised by one WINDOW_UPDATE.
    (
        value(0x4),
        value(0x5),
        65_535 + connection_increment.unwrap_or(0),
    )
}

#[tokio::test]
async fn advertises_large_windows_and_1_mib_frames() {
    let (stream, frame, connection) = advertised(Config::loopback()).await;
    assert_eq!(stream, Some(STREAM_WINDOW), "INITIAL_WINDOW_SIZE");
    assert_eq!(frame, Some(MAX_FRAME_SIZE), "MAX_FRAME_SIZE");
    assert_eq!(connection, CONNECTION_WINDOW);
}

#[tokio::test]
async fn the_flags_set_a_datanode_s_1_mib_windows_and_16_kib_frames() {
    let cli = dn_sim::cli::Cli::try_parse_from([
        "dn-sim",
        "--http2-stream-window",
        "1MB",
        "--http2-connection-window",
        "1MB",
        "--http2-max-frame-size",
        "16KB",
    ])
    .unwrap();
    let mut config = cli.serve.config().unwrap();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.metrics_listen = None;
    let (stream, frame, connection) = advertised(config).await;
    assert_eq!(stream, Some(1 << 20), "INITIAL_WINDOW_SIZE");
    // 16 KiB is HTTP/2's default: advertised or left out, the client assumes it.
    assert!(
        matches!(frame, None | Some(16_384)),
        "MAX_FRAME_SIZE {frame:?}"
    );
    assert_eq!(connection, 1 << 20);
}

#[test]
fn windows_and_frame_sizes_out_of_range_are_flag_errors() {
    for (flag, value) in [
        ("--http2-stream-window", "512"),
        ("--http2-stream-window", "2GB"),
        ("--http2-connection-window", "0"),
        ("--http2-max-frame-size", "8KB"),
        ("--http2-max-frame-size", "16MB"),
    ] {
        let err = dn_sim::cli::Cli::try_parse_from(["dn-sim", flag, value]).unwrap_err();
        assert!(err.to_string().contains(flag), "{flag} {value}: {err}");
    }
}

// Room for a whole 4 MB WriteChunk (plus its envelope) on one stream and four streams' worth per
// connection; a frame size HTTP/2 allows (2^14..2^24-1).
const _: () = assert!(STREAM_WINDOW > 4 << 20 && CONNECTION_WINDOW >= 4 * STREAM_WINDOW);
const _: () = assert!(MAX_FRAME_SIZE >= 1 << 14 && MAX_FRAME_SIZE < 1 << 24);
