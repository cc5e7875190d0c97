#!/usr/bin/env bash
# loadgen's memory over a long run at full rate: against one dn-sim, 0-byte echoes, 4 connections
# × 32 in flight (closed loop, as fast as it goes), with the live outputs on (JSON time series,
# histogram log). Samples loadgen's resident memory (VmRSS) every --every and prints a markdown
# table, then the first and last samples: they should stay under 64 MiB and flat.
#
#   scripts/soak-loadgen.sh [DURATION (default 10m)] [--every 30s]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

duration=10m
every=30
while [ $# -gt 0 ]; do
    case $1 in
        --every) every=${2%s}; shift 2 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) duration=$1; shift ;;
    esac
done

ensure_debian_packages python3
cargo build -q --release -p dn-sim -p loadgen
BIN=target/release
work=$(mktemp -d)
sim="" lg=""
trap 'kill $sim 2>/dev/null || true; [ -n "$lg" ] && kill $lg 2>/dev/null; rm -rf "$work"' EXIT
start_dn_sim "$work/dn-sim.ready" "$BIN/dn-sim" --metrics-listen none 2>/dev/null
sim=$dn_pid port=$ready_port

"$BIN/loadgen" echo --target "127.0.0.1:$port" --clients 4 -t 128 --duration "$duration" \
    --format json --output "$work/result.json" --histogram-log "$work/latency.hlog" \
    >/dev/null 2>"$work/stderr" &
lg=$!
rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$lg/status" 2>/dev/null || true; }

echo "## loadgen resident memory, $duration at full rate (4 connections × 32 in flight)"
echo
echo "| elapsed (s) | RSS (MiB) |"
echo "|---:|---:|"
first=""; last=""; max=0; start=$SECONDS
sleep 5
while kill -0 "$lg" 2>/dev/null; do
    rss=$(rss_mib)
    [ -z "$rss" ] && break
    echo "| $((SECONDS - start)) | $rss |"
    [ -z "$first" ] && first=$rss
    last=$rss
    max=$(python3 -c "print(max($max, $rss))")
    for _ in $(seq "$every"); do
        kill -0 "$lg" 2>/dev/null || break
        sleep 1
    done
done
wait "$lg" || true
lg=""
echo
python3 - "$work/result.json" "$first" "$last" "$max" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
first, last, peak = (float(x) for x in sys.argv[2:5])
pct = lambda q: [p["ms"] for p in r["latency"]["corrected"]["percentiles"] if p["percentile"] == q][0]
print(f"RSS at start: {first:.1f} MiB, at end: {last:.1f} MiB, peak: {peak:.1f} MiB "
      f"(goal: under 64 MiB and flat); change start→end: {last - first:+.1f} MiB")
print(f"requests: {r['totals']['requests']} ({r['totals']['failures']} failed) in "
      f"{r['elapsed_s']:.0f} s = {r['throughput']['requests_per_s']:.0f} requests/s; "
      f"p50 {pct(50):.3f} ms, p99.99 {pct(99.99):.3f} ms; "
      f"time series points: {len(r['series'])}")
EOF
