#!/usr/bin/env bash
# Is loadgen ever the bottleneck? loadgen and h2load (nghttp2-client) against one dn-sim, 0-byte
# read-only echoes, alternating in the same run:
#   1. throughput: 4 connections × 32 requests in flight (h2load -c 4 -m 32; loadgen --clients 4
#      -t 128 with a new stream per request, as h2load; loadgen persistent streams for reference);
#   2. latency: one connection, one request in flight; median from h2load's --log-file and from
#      loadgen's JSON.
# h2load sends a pre-encoded gRPC frame (load-generators.md §4) with the headers loadgen sends
# (content-type, te, grpc-timeout: the Java client's deadline); it cannot see gRPC or Ozone
# errors, so loadgen's failure count is the check that every echo succeeded. loadgen runs with its
# default I/O threads (one per core) and with one (as h2load -t 1).
#
#   scripts/bench-loadgen.sh [--requests 200000] [--latency-requests 20000] [--rounds 3]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

requests=200000
latency_requests=20000
rounds=3
while [ $# -gt 0 ]; do
    case $1 in
        --requests) requests=$2; shift 2 ;;
        --latency-requests) latency_requests=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

ensure_debian_packages nghttp2-client python3
cargo build -q --release -p dn-sim -p loadgen
BIN=target/release
work=$(mktemp -d)
port=$(free_port)
"$BIN/dn-sim" --listen "127.0.0.1:$port" --metrics-listen none 2>/dev/null &
sim=$!
trap 'kill $sim 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do
    (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done

# The gRPC frame of one Echo: containerID 1, datanodeUuid "dn", payloadSizeResp 0, readOnly.
python3 - "$work/req.bin" <<'EOF'
import struct, sys
def v(n):
    b = bytearray()
    while True:
        x = n & 0x7f; n >>= 7; b.append(x | (0x80 if n else 0))
        if not n: return bytes(b)
def f(k, wt, x): return v(k << 3 | wt) + (v(x) if wt == 0 else v(len(x)) + x)
echo = f(2, 0, 0) + f(4, 0, 1)
msg = f(1, 0, 22) + f(3, 0, 1) + f(4, 2, b'dn') + f(26, 2, echo)
open(sys.argv[1], 'wb').write(b'\x00' + struct.pack('>I', len(msg)) + msg)
EOF
url="http://127.0.0.1:$port/hadoop.hdds.datanode.XceiverClientProtocolService/send"
h2() {
    h2load "$@" -d "$work/req.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
        -H 'grpc-timeout: 30000m' "$url"
}
# h2load's req/s; fails unless every request got a 2xx.
h2load_rate() {
    local out
    out=$(h2 -n "$requests" -c 4 -m 32 -t 1)
    echo "$out" | grep -q "status codes: $requests 2xx" || { echo "h2load: not all 2xx: $out" >&2; return 1; }
    echo "$out" | sed -nE 's/^finished in .*s, ([0-9.]+) req\/s.*/\1/p'
}
# loadgen's requests/s from its JSON; fails on any failure.
loadgen_json() {
    "$BIN/loadgen" echo --target "127.0.0.1:$port" --format json "$@" 2>/dev/null >"$work/lg.json"
    python3 - "$work/lg.json" "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["totals"]["failures"] == 0, r["errors"]
print(f'{r["throughput"]["requests_per_s"]:.0f} {r["latency"]["uncorrected"]["percentiles"][0]["ms"]:.4f} {r["generator"]["cpu_share"]:.2f}')
EOF
}

echo "## Throughput: 0-byte echo, 4 connections × 32 in flight, $requests requests per run, $rounds rounds"
echo
echo "| round | h2load -t 1 (req/s) | loadgen, stream per request (req/s) | loadgen, stream per request, --runtime-threads 1 (req/s) | loadgen, persistent streams --pipeline 32 (req/s) |"
echo "|---:|---:|---:|---:|---:|"
h_sum=0; l_sum=0; l1_sum=0; p_sum=0
for r in $(seq "$rounds"); do
    h=$(h2load_rate)
    read -r l _ _ < <(loadgen_json -n "$requests" --clients 4 -t 128)
    read -r l1 _ _ < <(loadgen_json -n "$requests" --clients 4 -t 128 --runtime-threads 1)
    read -r p _ _ < <(loadgen_json -n "$requests" --clients 4 -t 4 --stream-mode persistent --pipeline 32)
    echo "| $r | ${h%.*} | $l | $l1 | $p |"
    h_sum=$(python3 -c "print($h_sum + $h)"); l_sum=$((l_sum + l)); l1_sum=$((l1_sum + l1)); p_sum=$((p_sum + p))
done
python3 - "$h_sum" "$l_sum" "$l1_sum" "$p_sum" "$rounds" <<'EOF'
import sys
h, l, l1, p, n = (float(x) for x in sys.argv[1:])
print(f"| mean | {h/n:.0f} | {l/n:.0f} | {l1/n:.0f} | {p/n:.0f} |")
print()
print(f"loadgen / h2load throughput ratio, same stream pattern: {l/h:.2f} (default I/O threads), "
      f"{l1/h:.2f} (1 I/O thread, as h2load -t 1); persistent streams: {p/h:.2f}")
EOF

echo
echo "## Latency: 0-byte echo, 1 connection, 1 in flight, $latency_requests requests per run"
echo
echo "| round | h2load median (ms) | loadgen median (ms) | loadgen / h2load |"
echo "|---:|---:|---:|---:|"
ratios=""
for r in $(seq "$rounds"); do
    h2 -n "$latency_requests" -c 1 -m 1 -t 1 --log-file "$work/h2.log" >/dev/null
    hmed=$(python3 -c "
import statistics, sys
d = [int(l.split()[2]) for l in open('$work/h2.log') if l.strip()]
print(f'{statistics.median(d) / 1000:.4f}')")
    read -r _ lmed _ < <(loadgen_json -n "$latency_requests" --clients 1 -t 1 --percentiles 50)
    ratio=$(python3 -c "print(f'{$lmed / $hmed:.2f}')")
    ratios="$ratios $ratio"
    echo "| $r | $hmed | $lmed | $ratio |"
done
echo
echo "Median latency ratio per round:$ratios (goal ≤ 1.2)."
echo "Machine: $(nproc) cores shared by dn-sim ($(nproc) runtime threads) and the client under test; h2load $(h2load --version | head -1 | awk '{print $NF}')."
