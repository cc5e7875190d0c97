#!/usr/bin/env bash
# What durability costs: `loadgen write` MB/s to dn-sim's memory store, to
# `--store dir:` and to `--store dir: --sync`, in one run, and how PutBlock commits of one
# container (serialized: one SQLite writer per container DB) compare with the same writers spread
# over several containers.
#
# Cells, each on a fresh dn-sim (and a fresh directory for dir:):
#   - bulk: 1 MB writes in 4 MB chunks (a PutBlock every 16 MB), 3 containers x 2 workers;
#   - commits: 64 KB writes, chunks and PutBlocks (PutBlock-bound), 6 workers in 1 container,
#     then 6 containers x 1 worker; dir: with and without --sync.
# Each cell prints MB/s (MB = 2^20 bytes, loadgen's unit: the sum over the parallel loadgen
# processes) and PutBlock latency p50/p99 (ms, the worst process's).
#
# Usage: scripts/bench-store.sh [--duration D]   (default 5s per cell)
# Environment: LOADGEN, DN_SIM (default: release builds, built here with CARGO_BUILD_JOBS,
# default 1). Starts its own dn-sim on a free 127.0.0.1 port, writes under a temporary directory
# it removes, stops only what it started. Exit: 0 done, 2 bad flag, 1 a run failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

duration=5s
while [ $# -gt 0 ]; do
    case $1 in
        --duration) duration=${2:?--duration needs a value}; shift 2 ;;
        *) echo "bench-store.sh: unknown flag $1 (known: --duration)" >&2; exit 2 ;;
    esac
done

release_binaries

work=$(mktemp -d)
dn_pid=""
cleanup() {
    [ -n "$dn_pid" ] && kill "$dn_pid" 2>/dev/null && wait "$dn_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# cell NAME STORE_FLAGS CONTAINERS WORKERS_EACH SHAPE_FLAGS
cell() {
    local name=$1 store=$2 containers=$3 workers=$4 shape=$5
    rm -rf "$work/data"
    local port
    # shellcheck disable=SC2086
    start_dn_sim "$work/dn-sim.ready" "$DN_SIM" --metrics-listen none --containers "1-$containers" \
        --capacity 64GB ${store//DIR/$work/data} 2>"$work/dn-sim.log"
    port=$ready_port
    local pids=()
    for c in $(seq 1 "$containers"); do
        # shellcheck disable=SC2086
        "$LOADGEN" write --target "127.0.0.1:$port" --container-id "$c" -t "$workers" \
            --duration "$duration" $shape --format json --output "$work/w$c.json" \
            >/dev/null 2>"$work/w$c.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do
        wait "$p" || { echo "$name: a loadgen write failed:" >&2; cat "$work"/w*.err >&2; exit 1; }
    done
    kill "$dn_pid"; wait "$dn_pid" 2>/dev/null || true; dn_pid=""
    python3 - "$name" "$work" "$containers" <<'EOF'
import json, sys
name, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = [json.load(open(f"{work}/w{c}.json")) for c in range(1, n + 1)]
mb_s = sum(r["write"]["mb_per_s"] for r in runs)
put = [r["ops"]["PutBlock"]["percentiles_ms"] for r in runs]
p50 = max(p["p50"] for p in put)
p99 = max(p["p99"] for p in put)
puts = sum(r["ops"]["PutBlock"]["count"] for r in runs)
print(f"| {name} | {mb_s:8.1f} | {puts:7d} | {p50:7.2f} | {p99:7.2f} |")
EOF
}

bulk="--write-size 1MB --chunk-size 4MB"
commits="--write-size 64KB --chunk-size 64KB --flush-size 64KB --block-size 1MB"
echo "loadgen write for $duration per cell; MB/s summed over the loadgen processes"
echo
echo "| cell | MB/s | PutBlocks | PutBlock p50 ms | PutBlock p99 ms |"
echo "|---|---|---|---|---|"
cell "bulk, memory, 3 containers x 2" "--store memory" 3 2 "$bulk"
cell "bulk, dir:, 3 containers x 2" "--store dir:DIR" 3 2 "$bulk"
cell "bulk, dir: --sync, 3 containers x 2" "--store dir:DIR --sync" 3 2 "$bulk"
cell "commits, dir:, 1 container x 6" "--store dir:DIR" 1 6 "$commits"
cell "commits, dir:, 6 containers x 1" "--store dir:DIR" 6 1 "$commits"
cell "commits, dir: --sync, 1 container x 6" "--store dir:DIR --sync" 1 6 "$commits"
cell "commits, dir: --sync, 6 containers x 1" "--store dir:DIR --sync" 6 1 "$commits"
