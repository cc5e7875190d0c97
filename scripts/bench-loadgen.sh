#!/usr/bin/env bash
# Is loadgen ever the bottleneck? loadgen and h2load (nghttp2-client) against one dn-sim, 0-byte
# read-only echoes, alternating in the same run:
#   1. throughput: 4 connections × 32 requests in flight (h2load -c 4 -m 32; loadgen --clients 4
#      -t 128 with a new stream per request, as h2load; loadgen persistent streams for reference),
#      with each client's CPU per request;
#   2. latency: one connection, one request in flight; median from h2load's --log-file and from
#      loadgen's JSON.
# h2load sends a pre-encoded gRPC frame (load-generators.md §4) with the headers loadgen sends
# (content-type, te, grpc-timeout: the Java client's deadline); it cannot see gRPC or Ozone
# errors, so loadgen's failure count is the check that every echo succeeded. loadgen runs with its
# default I/O threads (half the cores) and with two.
#
# Latency with one request in flight depends on where the scheduler puts client and server (same
# core or not, idle cores waking): for it, a second dn-sim runs pinned to CPU 0 with one thread
# and each client pinned to CPU 1 (taskset), in short alternating rounds; the median of the
# per-round ratios counts.
#
#   scripts/bench-loadgen.sh [--requests 200000] [--rounds 3] [--latency-requests 5000]
#                            [--latency-rounds 9]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

requests=200000
latency_requests=5000
rounds=3
latency_rounds=9
while [ $# -gt 0 ]; do
    case $1 in
        --requests) requests=$2; shift 2 ;;
        --latency-requests) latency_requests=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --latency-rounds) latency_rounds=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

ensure_debian_packages nghttp2-client python3
cargo build -q --release -p dn-sim -p loadgen
BIN=target/release
work=$(mktemp -d)
trap 'kill ${sim:-} ${lsim:-} 2>/dev/null || true; rm -rf "$work"' EXIT
start_dn_sim "$work/sim.ready" "$BIN/dn-sim" --metrics-listen none 2>/dev/null
sim=$dn_pid port=$ready_port

# The gRPC frame of one Echo: containerID 1, datanodeUuid "dn", payloadSizeResp 0, readOnly.
python3 - "$work/req.bin" <<'PY'
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
PY
url="http://127.0.0.1:$port/hadoop.hdds.datanode.XceiverClientProtocolService/send"
h2_args=(-d "$work/req.bin" -H 'content-type: application/grpc' -H 'te: trailers'
    -H 'grpc-timeout: 30000m')

# Runs a command with its stdout in $work/out; prints the CPU seconds (user + system) it used.
cpu_of() {
    python3 - "$work/out" "$@" <<'PY'
import resource, subprocess, sys
with open(sys.argv[1], "w") as out:
    rc = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL).returncode
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{r.ru_utime + r.ru_stime:.3f}")
sys.exit(rc)
PY
}

# h2load: "req/s µs-of-CPU-per-request"; fails unless every request got a 2xx.
h2load_rate() {
    local cpu
    cpu=$(cpu_of h2load -n "$requests" -c 4 -m 32 -t 1 "${h2_args[@]}" "$url")
    grep -q "status codes: $requests 2xx" "$work/out" || {
        echo "h2load: not all 2xx" >&2
        cat "$work/out" >&2
        return 1
    }
    python3 - "$work/out" "$cpu" "$requests" <<'PY'
import re, sys
rate = float(re.search(r"finished in .*s, ([0-9.]+) req/s", open(sys.argv[1]).read()).group(1))
print(f"{rate:.0f} {float(sys.argv[2]) * 1e6 / int(sys.argv[3]):.1f}")
PY
}

# loadgen: "req/s median-ms µs-of-CPU-per-request" from its JSON; fails on any failure.
loadgen_json() {
    local cpu
    cpu=$(cpu_of "$BIN/loadgen" echo --target "127.0.0.1:$port" --format json "$@")
    python3 - "$work/out" "$cpu" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["totals"]["failures"] == 0, r["errors"]
n = r["totals"]["requests"]
p50 = [p["ms"] for p in r["latency"]["uncorrected"]["percentiles"] if p["percentile"] == 50][0]
print(f'{r["throughput"]["requests_per_s"]:.0f} {p50:.4f} {float(sys.argv[2]) * 1e6 / n:.1f}')
PY
}

# dn-sim's CPU seconds so far (user + system), to charge each run its server-side cost: a client
# whose request pattern makes the server work harder (e.g. header blocks the server must decode
# from literals every time) lowers everybody's throughput on shared cores.
tick=$(getconf CLK_TCK)
sim_cpu() { awk -v t="$tick" '{printf "%.3f", ($14 + $15) / t}' "/proc/$sim/stat"; }
per_req() { python3 -c "print(f'{($2 - $1) * 1e6 / $requests:.1f}')"; }

echo "## Throughput: 0-byte echo, 4 connections × 32 in flight, $requests requests per run, $rounds rounds"
echo
echo "Each cell: requests/s (client CPU µs per request / dn-sim CPU µs per request)."
echo
echo "| round | h2load -t 1 | loadgen, stream per request | loadgen, stream per request, --runtime-threads 2 | loadgen, persistent streams, --pipeline 32 |"
echo "|---:|---:|---:|---:|---:|"
: >"$work/rows"
for r in $(seq "$rounds"); do
    s0=$(sim_cpu); h2load_rate >"$work/res"; s1=$(sim_cpu)
    read -r h hc <"$work/res"; hs=$(per_req "$s0" "$s1")
    s0=$(sim_cpu); loadgen_json -n "$requests" --clients 4 -t 128 >"$work/res"; s1=$(sim_cpu)
    read -r l _ lc <"$work/res"; ls=$(per_req "$s0" "$s1")
    s0=$(sim_cpu); loadgen_json -n "$requests" --clients 4 -t 128 --runtime-threads 2 >"$work/res"; s1=$(sim_cpu)
    read -r l1 _ l1c <"$work/res"; l1s=$(per_req "$s0" "$s1")
    s0=$(sim_cpu); loadgen_json -n "$requests" --clients 4 -t 4 --stream-mode persistent --pipeline 32 >"$work/res"; s1=$(sim_cpu)
    read -r p _ pc <"$work/res"; ps=$(per_req "$s0" "$s1")
    echo "| $r | $h req/s ($hc / $hs µs) | $l req/s ($lc / $ls µs) | $l1 req/s ($l1c / $l1s µs) | $p req/s ($pc / $ps µs) |"
    echo "$h $hc $hs $l $lc $ls $l1 $l1c $l1s $p $pc $ps" >>"$work/rows"
done
python3 - "$work/rows" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
m = [sum(c) / len(rows) for c in zip(*rows)]
cells = " | ".join(f"{m[i]:.0f} req/s ({m[i + 1]:.1f} / {m[i + 2]:.1f} µs)" for i in (0, 3, 6, 9))
print(f"| mean | {cells} |")
print()
per_round = [r[3] / r[0] for r in rows]
print(f"loadgen / h2load throughput, same stream pattern: {m[3] / m[0]:.2f} (default I/O threads; "
      f"per round {' '.join(f'{x:.2f}' for x in per_round)}, median {statistics.median(per_round):.2f}), "
      f"{m[6] / m[0]:.2f} (2 I/O threads); persistent streams: {m[9] / m[0]:.2f}.")
print(f"CPU per request, client / dn-sim: h2load {m[1]:.1f} / {m[2]:.1f} µs; loadgen {m[4]:.1f} / {m[5]:.1f} µs "
      f"(default) and {m[7]:.1f} / {m[8]:.1f} µs (2 I/O threads) with a stream per request, "
      f"{m[10]:.1f} / {m[11]:.1f} µs with persistent streams. Client and dn-sim share the cores, so "
      f"the client's CPU is taken from the server.")
PY

echo
pin_server=(); pin_client=()
if [ "$(nproc)" -ge 2 ]; then pin_server=(taskset -c 0); pin_client=(taskset -c 1); fi
start_dn_sim "$work/lsim.ready" "${pin_server[@]}" "$BIN/dn-sim" --metrics-listen none --threads 1 2>/dev/null
lsim=$dn_pid lport=$ready_port
lurl="http://127.0.0.1:$lport/hadoop.hdds.datanode.XceiverClientProtocolService/send"

echo "## Latency: 0-byte echo, 1 connection, 1 in flight, $latency_requests requests per run, $latency_rounds rounds"
echo
echo "dn-sim (1 thread) on CPU 0, the client on CPU 1."
echo
echo "| round | h2load median (ms) | loadgen median (ms) | loadgen / h2load |"
echo "|---:|---:|---:|---:|"
ratios=""
for r in $(seq "$latency_rounds"); do
    "${pin_client[@]}" h2load -n "$latency_requests" -c 1 -m 1 -t 1 "${h2_args[@]}" \
        --log-file "$work/h2.log" "$lurl" >/dev/null
    hmed=$(python3 - "$work/h2.log" <<'PY'
import statistics, sys
d = [int(l.split()[2]) for l in open(sys.argv[1]) if l.strip()]
print(f"{statistics.median(d) / 1000:.4f}")
PY
)
    cpu_of "${pin_client[@]}" "$BIN/loadgen" echo --target "127.0.0.1:$lport" --format json \
        -n "$latency_requests" --clients 1 -t 1 >/dev/null
    lmed=$(python3 - "$work/out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["totals"]["failures"] == 0, r["errors"]
print([p["ms"] for p in r["latency"]["uncorrected"]["percentiles"] if p["percentile"] == 50][0])
PY
)
    ratio=$(python3 -c "print(f'{$lmed / $hmed:.2f}')")
    ratios="$ratios $ratio"
    echo "| $r | $hmed | $lmed | $ratio |"
done
echo
python3 -c "
import statistics
r = [float(x) for x in '$ratios'.split()]
print(f'loadgen / h2load median latency: median over rounds {statistics.median(r):.2f} (goal ≤ 1.2); per round:$ratios')"
echo "Machine: $(nproc) cores; throughput: dn-sim ($(nproc) runtime threads) and the client share them; h2load $(h2load --version | head -1 | awk '{print $NF}')."
