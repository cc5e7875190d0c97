#!/usr/bin/env bash
# HDDS-15612's experiment (seeds/002_acab38addc548a3d.txt) with loadgen against dn-sim: CRC32
# computed when a chunk is sent ("at-flush", Ozone before the patch) versus while each application
# write() is copied into the chunk buffer ("incremental", the patch), for write sizes × writer
# threads × simulated DataNode WriteChunk latency. Prints a markdown table in MB/s (MB = 2^20
# bytes) with the improvement in percent, and writes every run to results/exp-checksum.csv.
#
# Each cell runs `loadgen write` for --seconds against one dn-sim (`--store discard`: lengths and
# checksums kept, bytes dropped, so runs are not limited by memory); the 2 ms runs use
# `--delay write_chunk=2ms` (2 ms added to every WriteChunk, not to PutBlock). at-flush and
# incremental run back to back per cell, alternating which goes first, so that both see the same
# machine conditions.
#
#   scripts/exp-checksum.sh [--quick] [--seconds 2] [--sizes "64KB 1MB"] [--threads "1 4"]
#                           [--latencies "0 2"]
# --quick: 2 sizes × 2 thread counts × both latencies, 1 s per run, with the debug build the test
# command has already built, runs to results/exp-checksum-quick.csv (about 35 s; a smoke test for
# CI: its numbers mean nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

sizes="64KB 256KB 512KB 1MB 2MB 4MB"
threads="1 4 7 14 28 42"
latencies="0 2"
seconds=2
quick=0
profile=release
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1; sizes="64KB 1MB"; threads="1 4"; seconds=1; profile=debug; shift ;;
        --seconds) seconds=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --latencies) latencies=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

if [ "$profile" = release ]; then
    cargo build -q --release -p dn-sim -p loadgen
else
    cargo build -q -p dn-sim -p loadgen
fi
BIN=target/$profile
mkdir -p results
csv=results/exp-checksum.csv
# --quick writes under target/, so the committed full-run results are never overwritten.
[ "$quick" = 1 ] && mkdir -p target/exp-quick && csv=target/exp-quick/exp-checksum.csv
work=$(mktemp -d)
sim=""
cleanup() {
    if [ -n "$sim" ]; then kill "$sim" 2>/dev/null || true; wait "$sim" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

start_sim() { # $1: WriteChunk delay in ms
    local delay=()
    [ "$1" != 0 ] && delay=(--delay "write_chunk=${1}ms")
    port=$(free_port)
    "$BIN/dn-sim" --listen "127.0.0.1:$port" --metrics-listen none --store discard \
        "${delay[@]}" 2>"$work/dn-sim.log" &
    sim=$!
    for _ in $(seq 100); do
        (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "dn-sim did not start:" >&2
    cat "$work/dn-sim.log" >&2
    exit 1
}

stop_sim() {
    kill "$sim" 2>/dev/null || true
    wait "$sim" 2>/dev/null || true
    sim=""
}

run_cell() { # $1 size, $2 threads, $3 mode → MB/s on stdout
    local out="$work/run.json"
    if ! "$BIN/loadgen" write --target "127.0.0.1:$port" --duration "${seconds}s" -t "$2" \
        --write-size "$1" --checksum CRC32 --checksum-mode "$3" --format json >"$out" 2>"$work/err"; then
        echo "loadgen write failed ($1, $2 threads, $3):" >&2
        cat "$work/err" "$out" >&2
        exit 1
    fi
    python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["totals"]["failures"] == 0, r["errors"]
w = r["write"]
print(f'{w["mb_per_s"]:.1f} {w["writes_per_s"]:.1f} {r["ops"]["WriteChunk"]["mean_ms"]:.3f} {r["ops"]["PutBlock"]["mean_ms"]:.3f}')
PY
}

echo "write_size,threads,dn_write_latency_ms,checksum,checksum_mode,seconds,mb_per_s,writes_per_s,write_chunk_mean_ms,put_block_mean_ms" >"$csv"
rows="$work/rows"
: >"$rows"
n=0
for lat in $latencies; do
    start_sim "$lat"
    for size in $sizes; do
        for t in $threads; do
            n=$((n + 1))
            if [ $((n % 2)) -eq 0 ]; then order="incremental at-flush"; else order="at-flush incremental"; fi
            for mode in $order; do
                read -r mbs wps wc pb < <(run_cell "$size" "$t" "$mode")
                echo "$size,$t,$lat,CRC32,$mode,$seconds,$mbs,$wps,$wc,$pb" >>"$csv"
                echo "$size $t $lat $mode $mbs" >>"$rows"
                echo "  $size × $t thread(s), DN write latency $lat ms, $mode: $mbs MB/s" >&2
            done
        done
    done
    stop_sim
done

python3 - "$rows" "$(nproc)" "$seconds" "$(uname -m)" "$profile" <<'PY'
import sys
rows, nproc, seconds, arch, profile = sys.argv[1:6]
cells, order = {}, []
for line in open(rows):
    size, t, lat, mode, mbs = line.split()
    key = (size, t, lat)
    if key not in cells:
        cells[key] = {}
        order.append(key)
    cells[key][mode] = float(mbs)
print("| write size | threads | DN write latency (ms) | CRC32 at-flush (MB/s) | CRC32 incremental (MB/s) | improvement (%) |")
print("|---:|---:|---:|---:|---:|---:|")
for key in order:
    c = cells[key]
    a, i = c["at-flush"], c["incremental"]
    imp = f"{(i - a) / a * 100:+.1f}" if a > 0 else "n/a"
    print(f"| {key[0]} | {key[1]} | {key[2]} | {a:,.1f} | {i:,.1f} | {imp} |")
print()
print("Legend:")
print("- write size: bytes per application write() call; KB = 2^10 bytes, MB = 2^20 bytes (Ozone's units).")
print("- threads: concurrent writers (`loadgen write -t`), each one Ozone output stream writing its own blocks, one RPC outstanding.")
print("- DN write latency (ms): service time dn-sim adds to every WriteChunk (`--delay write_chunk=2ms`); PutBlock gets none.")
print("- CRC32 at-flush (MB/s): CRC32 over each 4 MB chunk when it is sent (Ozone before HDDS-15612); MB/s = application bytes written per second, MB = 2^20 bytes.")
print("- CRC32 incremental (MB/s): CRC32 of each write() while it is copied into the chunk buffer (HDDS-15612).")
print("- improvement (%): (incremental − at-flush) / at-flush × 100; positive = incremental faster.")
print(f"- chunk 4 MB, bytes per checksum 16 KB, block 256 MB, PutBlock every 16 MB; {seconds} s per run; dn-sim --store discard on the same machine ({nproc} cores, {arch}); loadgen ({profile} build) with its default runtime threads (half the cores).")
print("- One run per cell, on a shared machine: differences of a few percent are noise. A real cluster adds network transfer and disk writes on 3 DataNodes, so the client's checksum time is a smaller share of each write than here.")
PY
echo "runs: $csv" >&2

# MB/s against threads, one line per write size and checksum mode, a chart per DN latency.
for lat in $latencies; do
    chart="${csv%.csv}-${lat}ms.svg"
    "$BIN/loadgen" plot --csv "$csv" --x threads --y mb_per_s --series write_size,checksum_mode \
        --where dn_write_latency_ms="$lat" \
        --title "loadgen write, CRC32 at-flush vs incremental (HDDS-15612), DN write latency $lat ms" \
        --x-label "threads (writers)" --y-label "throughput (MB/s, MB = 2^20 bytes)" -o "$chart" >/dev/null
    echo "chart: $chart" >&2
done
