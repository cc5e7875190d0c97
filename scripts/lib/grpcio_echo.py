"""An independent TLS client for dn-sim: Python grpcio (its own TLS stack, BoringSSL) sends one
ContainerCommandRequestProto Echo on XceiverClientProtocolService/send (a bidi stream) and checks
the answer. The messages are encoded by hand (no generated stubs): the fields used are few and
fixed by proto/DatanodeClientProtocol.proto.

Usage: grpcio_echo.py HOST:PORT CA_PEM [CLIENT_CERT_PEM CLIENT_KEY_PEM] [--expect-refusal]
Prints one line; exit 0 when the outcome is the expected one."""

import sys

import grpc

SEND = "/hadoop.hdds.datanode.XceiverClientProtocolService/send"
ECHO = 22  # Type.Echo
SUCCESS = 1  # Result.SUCCESS
RESPONSE_BYTES = 16


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, wire_type, value):
    key = varint(number << 3 | wire_type)
    if wire_type == 0:
        return key + varint(value)
    return key + varint(len(value)) + value


def echo_request():
    echo = field(1, 2, b"hello over TLS") + field(2, 0, RESPONSE_BYTES)
    return (
        field(1, 0, ECHO)  # cmdType
        + field(2, 2, b"grpcio-tls-check")  # traceID
        + field(3, 0, 1)  # containerID
        + field(4, 2, b"grpcio")  # datanodeUuid
        + field(26, 2, echo)  # echo
    )


def fields(data):
    """(number, value) of each field: ints for varints, bytes for length-delimited."""
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = read_varint(data, pos)
        elif wire_type == 2:
            length, pos = read_varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        else:
            raise ValueError(f"unexpected wire type {wire_type}")
        yield number, value


def read_varint(data, pos):
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def main(argv):
    expect_refusal = "--expect-refusal" in argv
    args = [a for a in argv if a != "--expect-refusal"]
    target, ca = args[0], args[1]
    cert = key = None
    if len(args) >= 4:
        cert, key = open(args[2], "rb").read(), open(args[3], "rb").read()
    credentials = grpc.ssl_channel_credentials(
        root_certificates=open(ca, "rb").read(), private_key=key, certificate_chain=cert
    )
    with grpc.secure_channel(target, credentials) as channel:
        send = channel.stream_stream(
            SEND, request_serializer=None, response_deserializer=None
        )
        try:
            answers = list(send(iter([echo_request()]), timeout=10))
        except grpc.RpcError as e:
            if expect_refusal:
                print(f"grpcio: refused as expected: {e.code().name}: {e.details()}")
                return 0
            print(f"grpcio: FAIL: {e.code().name}: {e.details()}")
            return 1
    if expect_refusal:
        print("grpcio: FAIL: the call succeeded without a client certificate")
        return 1
    if len(answers) != 1:
        print(f"grpcio: FAIL: {len(answers)} answers to one request")
        return 1
    got = dict(fields(answers[0]))
    payload = dict(fields(got.get(23, b""))).get(1, b"")
    if got.get(1) != ECHO or got.get(3) != SUCCESS or len(payload) != RESPONSE_BYTES:
        print(f"grpcio: FAIL: unexpected answer {answers[0]!r}")
        return 1
    print(f"grpcio {grpc.__version__}: Echo over TLS to {target}: SUCCESS, {len(payload)}-byte payload")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
