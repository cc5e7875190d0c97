#!/usr/bin/env bash
# Experiment "echo payload" (HDDS-10442, freon dn-echo): echoes with 0 B, 1 MiB and 10 MiB
# response payloads at 1, 8 and 32 threads over one connection, against loadgen's embedded
# dn-sim. One `loadgen sweep` writes the CSV, JSON and the calls/s chart; `loadgen plot` draws the
# latency chart (p50 solid, p99 dashed) from the CSV. The markdown table goes to stdout and to
# OUT/exp-echo-payload.md.
#
#   scripts/exp-echo-payload.sh [--quick] [--duration 5s] [--out DIR]
#     --quick   0 B and 1 MiB × 1 and 8 threads, 1 s cells (CI), into target/exp-quick unless --out
#     LOADGEN=path/to/loadgen  use this binary instead of building a release one
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
duration=5s
out=""
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1; shift ;;
        --duration) duration=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "unknown option $1 (--quick, --duration D, --out DIR)" >&2; exit 2 ;;
    esac
done
payloads=0,1024,10240 # KB (1 KB = 1024 B): 0 B, 1 MiB, 10 MiB
threads=1,8,32
if [ $quick = 1 ]; then
    payloads=0,1024
    threads=1,8
    duration=1s
    out=${out:-target/exp-quick}
fi
out=${out:-results}
if [ -z "${LOADGEN:-}" ]; then
    cargo build -q --release -p loadgen
    LOADGEN=target/release/loadgen
fi
mkdir -p "$out"

prefix=$out/exp-echo-payload
if ! "$LOADGEN" sweep \
    --param payload_resp=$payloads --param threads=$threads \
    --log-x --log-y --out "$prefix" \
    --title "Echo calls/s vs threads, by response payload (1 connection)" \
    --table payload_resp_kb,threads,throughput_calls_per_s,p50_ms,p99_ms,p99_9_ms,rx_mb_per_s,errors \
    -- echo --duration "$duration" -f >"$prefix.md" 2>"$prefix.log"; then
    tail -n 5 "$prefix.log" >&2
    exit 1
fi
"$LOADGEN" plot --csv "$prefix.csv" --x threads --y p50_ms,p99_ms --series payload_resp_kb \
    --dashed p99_ms --log-x --log-y \
    --title "Echo latency vs threads, by response payload (p50 solid, p99 dashed)" \
    --x-label "threads (one connection)" --y-label "latency (ms)" \
    -o "$prefix-latency.svg" 2>>"$prefix.log"
{
    echo
    echo "Machine: $(nproc) cores shared by loadgen and its embedded dn-sim; each cell: loadgen echo -t THREADS --payload-resp KB --duration $duration (closed loop, 1 connection)."
    echo "MB/s: response bytes received per second, 1 MB = 1024 × 1024 bytes (Ozone's units)."
} >>"$prefix.md"
cat "$prefix.md"
for f in "$prefix.csv" "$prefix.json" "$prefix.svg" "$prefix-latency.svg"; do
    [ -s "$f" ] || { echo "exp-echo-payload: $f is missing or empty" >&2; exit 1; }
done
for f in "$prefix.svg" "$prefix-latency.svg"; do
    grep -q '<svg' "$f" || { echo "exp-echo-payload: $f is not an SVG" >&2; exit 1; }
done
echo "wrote $prefix.csv, $prefix.json, $prefix.svg, $prefix-latency.svg, $prefix.md"
