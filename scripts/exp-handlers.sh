#!/usr/bin/env bash
# Experiment "handlers" (HDDS-11224: hdds.datanode.handler.count 1 → 10): dn-sim with H handlers
# and an injected echo service time D, loaded by 32 connections × 32 workers (freon's
# `--clients=32 -t 32`), so 32 requests are always outstanding. Little's law predicts
# throughput = min(H, 32) / D when D > 0; with D = 0 the CPU is the limit. One `loadgen sweep`
# (dn-sim's settings through its admin endpoint) writes the CSV, JSON and throughput chart,
# `loadgen plot` the p99 chart from the CSV; the markdown
# table goes to stdout and to OUT/exp-handlers.md.
#
#   scripts/exp-handlers.sh [--quick] [--duration 5s] [--out DIR]
#     --quick   2 × 2 cells of 1 s (CI), into target/exp-quick unless --out is given
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
handlers=1,2,4,8,16,32,64
delays=0,1ms,2ms
if [ $quick = 1 ]; then
    handlers=1,4
    delays=0,2ms
    duration=1s
    out=${out:-target/exp-quick}
fi
out=${out:-results}
if [ -z "${LOADGEN:-}" ]; then
    cargo build -q --release -p loadgen
    LOADGEN=target/release/loadgen
fi
mkdir -p "$out"

prefix=$out/exp-handlers
if ! "$LOADGEN" sweep \
    --param delay=$delays --param handler_count=$handlers \
    --log-x --out "$prefix" \
    --title "Echo throughput vs dn-sim handler count (32 connections x 32 threads)" \
    --table handler_count,delay_ms,throughput_calls_per_s,littles_law_calls_per_s,measured_over_predicted_pct,p50_ms,p99_ms \
    -- echo --clients 32 -t 32 --duration "$duration" -f >"$prefix.md" 2>"$prefix.log"; then
    tail -n 5 "$prefix.log" >&2
    exit 1
fi
"$LOADGEN" plot --csv "$prefix.csv" --x handler_count --y p99_ms --series delay_ms --log-x --log-y \
    --title "Echo p99 latency vs dn-sim handler count (32 connections x 32 threads)" \
    --x-label "handlers" --y-label "p99 latency (ms)" -o "$prefix-p99.svg" 2>>"$prefix.log"
{
    echo
    echo "Machine: $(nproc) cores shared by loadgen and its embedded dn-sim; each cell: loadgen echo --clients 32 -t 32 --duration $duration."
    echo "Little's law: min(handlers, 32 outstanding) / delay; with no delay the CPU is the limit (—)."
} >>"$prefix.md"
cat "$prefix.md"
for f in "$prefix.csv" "$prefix.json" "$prefix.svg" "$prefix-p99.svg"; do
    [ -s "$f" ] || { echo "exp-handlers: $f is missing or empty" >&2; exit 1; }
done
for f in "$prefix.svg" "$prefix-p99.svg"; do
    grep -q '<svg' "$f" || { echo "exp-handlers: $f is not an SVG" >&2; exit 1; }
done
echo "wrote $prefix.csv, $prefix.json, $prefix.svg, $prefix-p99.svg, $prefix.md"
