//! [`FrameScanner`]: follows HTTP/2 frames through a byte stream cut anywhere, without copying
//! or allocating, for the tap's counts and policies.

use common::http2::{FRAME_HEADER_LEN, FrameHeader};

/// An event of a [`FrameScanner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FrameEvent {
    /// A frame header: type, flags, stream ID.
    Frame { kind: u8, flags: u8, stream: u32 },
    /// The error code of an RST_STREAM or GOAWAY frame.
    ErrorCode { kind: u8, code: u32 },
}

/// Follows HTTP/2 frames through a byte stream cut anywhere: frame headers are collected, payloads
/// skipped, except the four bytes of an RST_STREAM's or GOAWAY's error code.
#[derive(Default)]
pub(super) struct FrameScanner {
    head: [u8; FRAME_HEADER_LEN],
    head_len: u8,
    /// Payload bytes of the current frame not yet passed.
    payload_left: u32,
    /// Payload bytes of the current frame passed.
    payload_at: u32,
    kind: u8,
    /// Where the current frame's error code starts in its payload, if it has one.
    code_at: Option<u32>,
    code: [u8; 4],
    code_len: u8,
}

impl FrameScanner {
    /// Between two frames (so a frame of our own may be written here).
    pub(super) fn at_boundary(&self) -> bool {
        self.head_len == 0 && self.payload_left == 0
    }

    pub(super) fn feed(&mut self, mut data: &[u8], mut on: impl FnMut(FrameEvent)) {
        while !data.is_empty() {
            if self.payload_left == 0 {
                let take = (FRAME_HEADER_LEN - self.head_len as usize).min(data.len());
                self.head[self.head_len as usize..][..take].copy_from_slice(&data[..take]);
                self.head_len += take as u8;
                data = &data[take..];
                if (self.head_len as usize) < FRAME_HEADER_LEN {
                    return;
                }
                self.head_len = 0;
                let header = FrameHeader::parse(&self.head);
                self.kind = header.kind();
                on(FrameEvent::Frame {
                    kind: header.kind(),
                    flags: header.flags(),
                    stream: header.stream_id(),
                });
                self.payload_left = header.len();
                self.payload_at = 0;
                self.code_len = 0;
                self.code_at = header.error_code_offset();
                continue;
            }
            let take = (self.payload_left as usize).min(data.len());
            if let Some(at) = self.code_at.filter(|_| self.code_len < 4) {
                for (i, &b) in data[..take].iter().enumerate() {
                    let pos = self.payload_at + i as u32;
                    if pos >= at + 4 {
                        break;
                    }
                    if pos >= at {
                        self.code[self.code_len as usize] = b;
                        self.code_len += 1;
                    }
                }
                if self.code_len == 4 {
                    on(FrameEvent::ErrorCode {
                        kind: self.kind,
                        code: u32::from_be_bytes(self.code),
                    });
                }
            }
            self.payload_at += take as u32;
            self.payload_left -= take as u32;
            data = &data[take..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::http2::frame_type::{DATA, GOAWAY, HEADERS, RST_STREAM, SETTINGS};

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend([kind, flags]);
        f.extend(stream.to_be_bytes());
        f.extend(payload);
        f
    }

    fn events(bytes: &[u8], cut: usize) -> Vec<FrameEvent> {
        let mut scanner = FrameScanner::default();
        let mut out = Vec::new();
        for piece in bytes.chunks(cut) {
            scanner.feed(piece, |e| out.push(e));
        }
        assert!(scanner.at_boundary());
        out
    }

    #[test]
    fn frames_and_error_codes_are_found_however_the_bytes_are_cut() {
        let mut bytes = frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0xff, 0xff]);
        bytes.extend(frame(HEADERS, 0x5, 3, &[0x82; 40]));
        bytes.extend(frame(RST_STREAM, 0, 3, &8u32.to_be_bytes()));
        bytes.extend(frame(DATA, 0, 5, &[7; 100_000]));
        let mut goaway = 5u32.to_be_bytes().to_vec();
        goaway.extend(11u32.to_be_bytes());
        goaway.extend(b"too_many_resets");
        bytes.extend(frame(GOAWAY, 0, 0, &goaway));
        let expected = vec![
            FrameEvent::Frame {
                kind: SETTINGS,
                flags: 0,
                stream: 0,
            },
            FrameEvent::Frame {
                kind: HEADERS,
                flags: 0x5,
                stream: 3,
            },
            FrameEvent::Frame {
                kind: RST_STREAM,
                flags: 0,
                stream: 3,
            },
            FrameEvent::ErrorCode {
                kind: RST_STREAM,
                code: 8,
            },
            FrameEvent::Frame {
                kind: DATA,
                flags: 0,
                stream: 5,
            },
            FrameEvent::Frame {
                kind: GOAWAY,
                flags: 0,
                stream: 0,
            },
            FrameEvent::ErrorCode {
                kind: GOAWAY,
                code: 11,
            },
        ];
        for cut in [1, 2, 3, 5, 9, 10, 17, 4096, bytes.len()] {
            assert_eq!(events(&bytes, cut), expected, "cut every {cut} bytes");
        }
    }
}
