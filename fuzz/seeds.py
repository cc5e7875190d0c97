#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz/corpus/ (decode_request: valid encoded requests and
responses of the DataNode client protocol; ratis_message: the same requests as Ozone's Raft
message content, a 4-byte length, the request without its data, the data; http2_client_frames: server byte streams with SETTINGS,
HEADERS with :status and grpc-status, DATA, trailers, CONTINUATION, PING, WINDOW_UPDATE,
RST_STREAM, GOAWAY; hrpc_response: SCM's Hadoop RPC answers, good and broken). store_sequence's seeds are inputs libFuzzer found, minimised (`cargo fuzz
cmin`), since `arbitrary`'s byte layout is not written by hand. Deterministic: rerunning it
rewrites the same files. Usage: fuzz/seeds.py (from anywhere)."""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- protobuf ----
def varint(n):
    if n < 0:
        n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_varint(field, n):
    return varint(field << 3) + varint(n)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(field << 3 | 2) + varint(len(b)) + b


def block_id(container, local, bcs=None):
    m = f_varint(1, container) + f_varint(2, local)
    if bcs is not None:
        m += f_varint(3, bcs)
    return m


def checksum_data(kind=2, bpc=16384, sums=()):
    m = f_varint(1, kind) + f_varint(2, bpc)
    for s in sums:
        m += f_bytes(3, s)
    return m


def chunk_info(offset, length, name=None):
    return (
        f_bytes(1, name or f"1_chunk_{offset}")
        + f_varint(2, offset)
        + f_varint(3, length)
        + f_bytes(5, checksum_data(sums=[b"\x00\x01\x02\x03"]))
    )


def envelope(cmd, container=1, extra=b""):
    return f_varint(1, cmd) + f_varint(3, container) + f_bytes(4, "dn-sim-uuid") + extra


def requests():
    data = bytes(range(64))
    bd = f_bytes(1, block_id(1, 5)) + f_bytes(4, chunk_info(0, 64)) + f_varint(5, 64)
    return {
        "echo": envelope(22, extra=f_bytes(26, f_bytes(1, b"hello") + f_varint(2, 16))),
        "echo-empty": envelope(22, extra=f_bytes(26, b"")),
        "create-container": envelope(1, extra=f_bytes(6, f_varint(5, 1))),
        "read-container": envelope(2, extra=f_bytes(7, b"")),
        "close-container": envelope(17, extra=f_bytes(11, b"")),
        "delete-container": envelope(4, extra=f_bytes(9, f_varint(2, 1))),
        "write-chunk": envelope(
            12,
            extra=f_bytes(17, f_bytes(1, block_id(1, 5)) + f_bytes(2, chunk_info(0, 64)) + f_bytes(3, data)),
        ),
        "write-chunk-put": envelope(
            12,
            extra=f_bytes(
                17,
                f_bytes(1, block_id(1, 5))
                + f_bytes(2, chunk_info(0, 64))
                + f_bytes(3, data)
                + f_bytes(4, f_bytes(1, bd) + f_varint(2, 1)),
            ),
        ),
        "put-block": envelope(6, extra=f_bytes(12, f_bytes(1, bd) + f_varint(2, 1))),
        "get-block": envelope(7, extra=f_bytes(13, f_bytes(1, block_id(1, 5, bcs=0)))),
        "read-chunk-v1": envelope(
            10, extra=f_bytes(16, f_bytes(1, block_id(1, 5)) + f_bytes(2, chunk_info(0, 64)) + f_varint(3, 1))
        ),
        "list-block": envelope(9, extra=f_bytes(15, f_varint(2, 0) + f_varint(3, 10))),
        "committed-length": envelope(18, extra=f_bytes(22, f_bytes(1, block_id(1, 5)))),
        "put-small-file": envelope(
            15,
            extra=f_bytes(
                20, f_bytes(1, f_bytes(1, bd)) + f_bytes(2, chunk_info(0, 64)) + f_bytes(3, data)
            ),
        ),
        "get-small-file": envelope(16, extra=f_bytes(21, f_bytes(1, f_bytes(1, block_id(1, 5))))),
        "finalize-block": envelope(21, extra=f_bytes(25, f_bytes(1, block_id(1, 5)))),
        # Invalid ones: a missing required field, an unknown cmdType.
        "missing-localid": envelope(7, extra=f_bytes(13, f_bytes(1, f_varint(1, 1)))),
        "unknown-cmdtype": envelope(99),
        # Responses (the same bytes are also decoded as a response).
        "resp-write-chunk": f_varint(1, 12) + f_varint(3, 1) + f_bytes(15, b""),
        "resp-read-chunk": f_varint(1, 10)
        + f_varint(3, 1)
        + f_bytes(16, f_bytes(1, block_id(1, 5)) + f_bytes(2, chunk_info(0, 4)) + f_bytes(4, f_bytes(1, b"ab") + f_bytes(1, b"cd"))),
        "resp-error": f_varint(1, 12) + f_varint(3, 36) + f_bytes(4, "Container is unhealthy"),
    }


# ---- Ratis: ContainerCommandRequestMessage ----
GROUP = "00000000-0000-0000-0000-000000009858"


def raft_content(header, data=b""):
    return struct.pack(">I", len(header)) + header + data


def ratis_messages():
    data = bytes(range(64))
    write_header = envelope(12, extra=f_bytes(17, f_bytes(1, block_id(1, 5)) + f_bytes(2, chunk_info(0, 64))))
    echo = envelope(22, extra=f_bytes(26, f_bytes(1, b"hello") + f_varint(2, 16) + f_varint(4, 0)))
    seeds = {name: raft_content(r) for name, r in requests().items() if not name.startswith("resp-")}
    seeds.update({
        "write-chunk-data-after-header": raft_content(write_header, data),
        "echo-with-pipeline": raft_content(echo + f_bytes(5, GROUP)),
        "echo-foreign-pipeline": raft_content(echo + f_bytes(5, "00000000-0000-0000-0000-000000000001")),
        "echo-closed-container": raft_content(envelope(22, container=2, extra=f_bytes(26, f_varint(4, 0)))),
        "header-length-past-the-end": struct.pack(">I", 1000) + echo,
        "header-length-negative": struct.pack(">I", 0xFFFFFFFF) + echo,
        "short": b"\x00\x00",
    })
    return seeds


# ---- HTTP/2 ----
def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def settings(*pairs, ack=False):
    return frame(0x4, 0x1 if ack else 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def hpack_literal(name, value):
    # Literal header field without indexing, new name (RFC 7541 §6.2.2).
    name, value = name.encode(), value.encode()
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def hpack_indexed_literal(name, value):
    # Literal with incremental indexing, new name: enters the dynamic table.
    name, value = name.encode(), value.encode()
    return b"\x40" + bytes([len(name)]) + name + bytes([len(value)]) + value


STATUS_200 = b"\x88"  # static table index 8
HEADERS, DATA, RST, PING, GOAWAY, WINDOW, CONT = 0x1, 0x0, 0x3, 0x6, 0x7, 0x8, 0x9
END_STREAM, END_HEADERS, PADDED = 0x1, 0x4, 0x8


def response_headers(stream):
    block = STATUS_200 + hpack_literal("content-type", "application/grpc")
    return frame(HEADERS, END_HEADERS, stream, block)


def grpc_message(payload):
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def trailers(stream, status="0", message=None):
    block = hpack_literal("grpc-status", status)
    if message:
        block += hpack_literal("grpc-message", message)
    return frame(HEADERS, END_HEADERS | END_STREAM, stream, block)


def answer(stream, payload=b"\x08\x16\x18\x01"):
    return response_headers(stream) + frame(DATA, 0, stream, grpc_message(payload)) + trailers(stream)


# Option byte (see fuzz_targets/http2_client_frames.rs): bits 0-2 exchanges-1, bit 3 large first
# request, bit 4 prepend SETTINGS, bits 5-7 write piece size.
def opts(calls=1, large=False, prepend=False, piece=0):
    return bytes([(calls - 1) | (0x8 if large else 0) | (0x10 if prepend else 0) | (piece << 5)])


def http2_streams():
    s = settings((0x3, 100), (0x4, 65535), (0x5, 16384))
    ack = settings(ack=True)
    one = answer(1)
    two = answer(1) + answer(3)
    return {
        "one-answer": opts(1) + s + ack + one,
        "two-answers-split": opts(2, piece=1) + s + ack + two,
        "trailers-only-unavailable": opts(1)
        + s
        + frame(HEADERS, END_HEADERS | END_STREAM, 1, STATUS_200 + hpack_literal("grpc-status", "14") + hpack_literal("grpc-message", "try%20again") + hpack_literal("grpc-retry-pushback-ms", "10")),
        "continuation": opts(1)
        + s
        + frame(HEADERS, 0, 1, STATUS_200)
        + frame(CONT, END_HEADERS, 1, hpack_literal("content-type", "application/grpc"))
        + frame(DATA, END_STREAM, 1, grpc_message(b"")),
        "padded-data": opts(1)
        + s
        + response_headers(1)
        + frame(DATA, PADDED, 1, b"\x03" + grpc_message(b"ab") + b"\x00\x00\x00")
        + trailers(1),
        "dynamic-table": opts(2)
        + s
        + frame(HEADERS, END_HEADERS, 1, STATUS_200 + hpack_indexed_literal("grpc-status", "0"))
        + frame(DATA, END_STREAM, 1, grpc_message(b""))
        + frame(HEADERS, END_HEADERS | END_STREAM, 3, STATUS_200 + b"\xbe"),  # index 62: the entry above
        "window-for-large": opts(1, large=True)
        + s
        + frame(WINDOW, 0, 0, struct.pack(">I", 1 << 20))
        + frame(WINDOW, 0, 1, struct.pack(">I", 1 << 20))
        + one,
        "initial-window-zero": opts(2, large=True) + settings((0x4, 0)) + settings((0x4, 1 << 20)) + two,
        "max-streams-one": opts(3) + settings((0x3, 1)) + one + answer(3) + answer(5),
        "ping-and-rst": opts(2)
        + s
        + frame(PING, 0, 0, b"12345678")
        + frame(RST, 0, 1, struct.pack(">I", 8))
        + answer(3),
        "goaway": opts(3) + s + one + frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0) + b"bye"),
        "prepended-settings": opts(1, prepend=True, piece=3) + one,
        "not-settings": opts(1) + frame(PING, 0, 0, b"12345678"),
        # RFC 9113 checks the client enforces (loadgen connection/http2/frame.rs, flow.rs).
        "window-zero-stream": opts(1, large=True) + s + frame(WINDOW, 0, 1, struct.pack(">I", 0)) + one,
        "window-zero-connection": opts(1, large=True) + s + frame(WINDOW, 0, 0, struct.pack(">I", 0)),
        "window-overflow-stream": opts(1, large=True)
        + s
        + frame(WINDOW, 0, 1, struct.pack(">I", 0x7FFFFFFF))
        + frame(WINDOW, 0, 1, struct.pack(">I", 0x7FFFFFFF)),
        "window-overflow-connection": opts(1, large=True)
        + s
        + frame(WINDOW, 0, 0, struct.pack(">I", 0x7FFFFFFF))
        + frame(WINDOW, 0, 0, struct.pack(">I", 0x7FFFFFFF)),
        "initial-window-too-large": opts(1) + s + settings((0x4, 0x80000000)),
        "initial-window-overflows-stream": opts(1, large=True)
        + s
        + frame(WINDOW, 0, 1, struct.pack(">I", 0x7FFFFFFF))
        + settings((0x4, 65536)),
        "settings-ack-with-payload": opts(1) + s + frame(0x4, 0x1, 0, struct.pack(">HI", 0x4, 1)),
        "settings-bad-length": opts(1) + s + frame(0x4, 0, 0, b"\x00" * 7),
        "trailers-without-grpc-status": opts(1)
        + s
        + response_headers(1)
        + frame(DATA, 0, 1, grpc_message(b"\x08\x16\x18\x01"))
        + frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack_literal("x-other", "1")),
        "trailers-only-without-grpc-status": opts(1)
        + s
        + frame(HEADERS, END_HEADERS | END_STREAM, 1, STATUS_200 + hpack_literal("content-type", "application/grpc")),
    }


# ---- Hadoop RPC: SCM's answers (hrpc_response: 4-byte length prefix, then the frame) ----
def delimited(m):
    return varint(len(m)) + m


def rpc_frame(*parts):
    body = b"".join(delimited(p) for p in parts)
    return struct.pack(">I", len(body)) + body


def f_sint32(field, n):
    return f_varint(field, (n << 1) ^ (n >> 31))


def hrpc_responses():
    ok = lambda call: f_varint(1, call) + f_varint(2, 0) + f_varint(3, 9) + f_bytes(7, bytes(16))
    version = f_varint(1, 1) + f_varint(5, 1) + f_bytes(6, f_varint(1, 1) + f_bytes(2, f_bytes(1, "clusterID") + f_bytes(2, "CID-1")))
    registered = f_varint(1, 2) + f_varint(5, 1) + f_bytes(
        7, f_varint(1, 1) + f_bytes(2, "00000000-0000-0000-0000-000000000001") + f_bytes(3, "CID-1"))
    command = f_varint(1, 1) + f_bytes(2, b"")  # reregisterCommand
    heartbeat = f_varint(1, 3) + f_varint(5, 1) + f_bytes(
        8, f_bytes(1, "00000000-0000-0000-0000-000000000001") + f_bytes(2, command) + f_varint(3, 0))
    error = (f_varint(1, 2) + f_varint(2, 1) + f_bytes(4, "java.io.IOException")
             + f_bytes(5, "boom") + f_varint(6, 1))
    fatal = f_varint(1, 0xFFFFFFFD) + f_varint(2, 2) + f_bytes(4, "org.apache.hadoop.ipc.RpcServerException") + f_varint(6, 14)
    return {
        "get-version": rpc_frame(ok(0), version),
        "register": rpc_frame(ok(1), registered),
        "heartbeat-reregister": rpc_frame(ok(2), heartbeat),
        "error": rpc_frame(error),
        "fatal-version-mismatch": rpc_frame(fatal),
        "pre-v9": struct.pack(">i", -1) + struct.pack(">i", 1),
        "header-without-status": rpc_frame(f_varint(1, 0)),
        "body-past-end": struct.pack(">I", 6) + delimited(ok(0))[:4] + b"\x7f",
        "trailing": rpc_frame(ok(0), version) + b"\x00",
        "sint-call-id": rpc_frame(f_sint32(1, -3) + f_varint(2, 0), b""),
    }


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, f"seed-{name}"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("decode_request", requests())
    write("http2_client_frames", http2_streams())
    write("ratis_message", ratis_messages())
    write("hrpc_response", hrpc_responses())
