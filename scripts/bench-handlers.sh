#!/usr/bin/env bash
# Handler-count experiment (this project's answer to HDDS-11224): dn-sim with H handlers and an
# injected echo service time D, loaded by loadgen with 32 connections × 32 workers (freon's
# `--clients=32 -t 32`), so 32 requests are always outstanding. Little's law predicts
# throughput = min(H, 32) / D. Prints a markdown table and dn-sim's CPU cost per echo.
#
#   scripts/bench-handlers.sh [--duration 5s] [--handlers "1 2 4 8 16 32 64"] [--delays "0 1ms 2ms"]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

duration=5s
handlers="1 2 4 8 16 32 64"
delays="0 1ms 2ms"
while [ $# -gt 0 ]; do
    case $1 in
        --duration) duration=$2; shift 2 ;;
        --handlers) handlers=$2; shift 2 ;;
        --delays) delays=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

cargo build -q --release -p dn-sim -p loadgen
BIN=target/release
ready=$(mktemp -u /tmp/bench-handlers.XXXXXX.ready)
trap 'kill $dn_pid 2>/dev/null || true; rm -f "$ready"' EXIT
start_dn_sim "$ready" "$BIN/dn-sim" 2>/dev/null
sim=$dn_pid grpc=$ready_port http=${ready_admin##*:}
wait_http "http://127.0.0.1:$http/config"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$sim/stat"; }
field() { grep -m1 "$1" | sed -E 's/.*= ([0-9.]+).*/\1/'; }

echo "| handlers | echo delay | outstanding | throughput (calls/s) | Little's law (calls/s) | measured / predicted | p50 (ms) | p99 (ms) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
cost_line=""
for d in $delays; do
    for h in $handlers; do
        if [ "$d" = "0" ]; then delays_json='{}'; else delays_json="{\"echo\": \"$d\"}"; fi
        curl -fsS -X PUT "http://127.0.0.1:$http/config" -d "{\"handler_count\": $h, \"delays\": $delays_json}" >/dev/null
        ticks_before=$(cpu_ticks)
        out=$("$BIN/loadgen" echo --target "127.0.0.1:$grpc" --clients 32 -t 32 --duration "$duration" -f 2>/dev/null)
        ticks_after=$(cpu_ticks)
        count=$(echo "$out" | field "count =")
        rate=$(echo "$out" | field "mean rate")
        p50=$(echo "$out" | field "median =")
        p99=$(echo "$out" | field " 99% <=")
        if [ "$d" = "0" ]; then
            predicted="—"; ratio="— (CPU-bound)"
            if [ "$h" = "$(echo $handlers | awk '{print $NF}')" ]; then
                us=$(python3 -c "print(f'{($ticks_after - $ticks_before) * 10000 / $count:.1f}')")
                cost_line="dn-sim CPU per 0-byte echo at saturation ($h handlers, $rate calls/s): $us µs (user+system, /proc/PID/stat)"
            fi
        else
            read -r predicted ratio < <(python3 -c "
import re
d = float(re.sub('ms', '', '$d')) / 1000
p = min($h, 32) / d
print(f'{p:.0f} {float($rate) / p * 100:.1f}%')")
        fi
        echo "| $h | $d | 32 | $rate | $predicted | $ratio | $p50 | $p99 |"
    done
done
echo
echo "$cost_line"
echo "Machine: $(nproc) cores; loadgen and dn-sim share them. Each cell: loadgen echo --clients 32 -t 32 --duration $duration."
