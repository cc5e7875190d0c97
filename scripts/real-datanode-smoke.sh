#!/usr/bin/env bash
# A real Ozone DataNode (scripts/real-datanode.sh) answers loadgen: starts one, waits for its
# `datanode 127.0.0.1:PORT` line, runs `loadgen echo --target` at it (a new stream per request,
# payloads both ways, persistent streams, open loop) and `loadgen write --then-read` and
# `loadgen read --manifest`, stops it. Exit 0 when every echo succeeded (each loadgen run exits 0
# and writes a report of its own), 3 only when Maven Central is out of reach (a probe; see
# scripts/lib.sh harness_setup), 1 otherwise (a harness that does not compile included).
# Usage: scripts/real-datanode-smoke.sh [--ozone-version V]   (LOADGEN=path to use a built loadgen)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
version=2.2.0
[ "${1:-}" = --ozone-version ] && version="${2:?--ozone-version needs a value}"
. scripts/lib.sh
harness_setup real-datanode-smoke.sh "$version" || exit $?
loadgen="${LOADGEN:-}"
if [ -z "$loadgen" ]; then
    cargo build -q --locked -p loadgen
    loadgen=target/debug/loadgen
fi

work="$(mktemp -d)"
fifo="$work/stdin"
mkfifo "$fifo"
scripts/real-datanode.sh --ozone-version "$version" --containers 1-3 <"$fifo" >"$work/out" 2>"$work/log" &
dn=$!
exec 9>"$fifo" # holds the DataNode's stdin open; closing it stops the DataNode
cleanup() {
    exec 9>&-
    kill -TERM "$dn" 2>/dev/null || true
    wait "$dn" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 1 300); do
    grep -q '^datanode ' "$work/out" && break
    kill -0 "$dn" 2>/dev/null || { tail -20 "$work/log" >&2; echo "real-datanode-smoke.sh: the DataNode did not start" >&2; exit 1; }
    sleep 1
done
addr="$(awk '/^datanode /{print $2}' "$work/out")"
ratis="$(awk '/^ratis /{print $2}' "$work/out")"
pipeline="$(awk '/^pipeline /{print $2}' "$work/out")"
ratis_admin="$(awk '/^ratis-admin /{print $2}' "$work/out")"
[ -n "$addr" ] || { echo "real-datanode-smoke.sh: no datanode line within 300 s" >&2; exit 1; }
[ -n "$ratis" ] && [ -n "$pipeline" ] && [ -n "$ratis_admin" ] || { echo "real-datanode-smoke.sh: the harness named no Ratis port, admin port or pipeline" >&2; exit 1; }
echo "real DataNode $version at $addr (Ratis $ratis, pipeline $pipeline)"

run() {
    local target=${target:-$addr}
    echo "+ loadgen echo --target $target $*"
    runs=$((runs + 1))
    # A report of its own per run, so that a run that writes none cannot be judged by the last.
    local report="$work/r$runs.json" status=0
    rm -f "$report"
    "$loadgen" echo --target "$target" --container-id 1 "$@" --format json --output "$report" >/dev/null 2>"$work/loadgen.err" || status=$?
    if [ "$status" != 0 ] || [ ! -s "$report" ]; then
        tail -20 "$work/loadgen.err" >&2
        echo "real-datanode-smoke.sh: loadgen echo $* exited $status$([ -s "$report" ] || echo ', no report')" >&2
        exit 1
    fi
    python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r.get("totals", r)
ok, failed = t.get("successes"), t.get("failures")
print(f"  {ok} succeeded, {failed} failed")
sys.exit(0 if failed == 0 and ok else 1)
PY
}
runs=0
run -n 2000 -t 8
run -n 2000 -t 8 --clients 2 --payload-req 4 --payload-resp 4
run -n 2000 -t 4 --stream-mode persistent --pipeline 4
run --duration 3s -t 4 --rate 500
# Ozone's Ratis path: echo as Raft writes and as Raft reads on the real Ratis server.
target=$ratis run -n 1000 -t 4 --pipeline 8 --ratis --pipeline-id "$pipeline" --read-only=false
target=$ratis run -n 1000 -t 4 --pipeline 8 --ratis --pipeline-id "$pipeline" --read-only=true
# The pipeline as the DataNode names it: groupList on its Ratis admin port.
target=$ratis run -n 200 -t 2 --ratis --ratis-admin "$ratis_admin"
# With retries: one Raft request at a time per worker, a retry keeping its call id.
target=$ratis run -n 300 -t 2 --ratis --pipeline-id "$pipeline" --retry 3 --retry-backoff none

# Writes (BlockOutputStream's WriteChunks and PutBlocks, CRC32), every byte read back and verified,
# then the same blocks again from the manifest. loadgen exits non-zero on any failure or
# data-integrity error.
blocks() {
    local target=${target:-$addr} container=${container:-2}
    echo "+ loadgen $1 --target $target --container-id $container ${*:2}"
    if ! "$loadgen" "$1" --target "$target" --container-id "$container" "${@:2}" >"$work/blocks.txt" 2>&1; then
        tail -30 "$work/blocks.txt" >&2
        echo "real-datanode-smoke.sh: loadgen $1 failed against the real DataNode" >&2
        exit 1
    fi
    grep -E 'Bytes verified|Data-integrity errors' "$work/blocks.txt" | sed 's/^/  /'
}
blocks write -n 40 -t 2 --write-size 1MB --then-read --manifest "$work/manifest.jsonl"
blocks read -t 2 --manifest "$work/manifest.jsonl"
# Ozone's default write path: the same writes as Raft transactions on the Ratis port (container 3,
# in the pipeline), then every block read back over the gRPC port, as Ozone reads RATIS data.
target=$ratis container=3 blocks write -n 40 -t 2 --write-size 1MB --ratis --pipeline-id "$pipeline" \
    --retry 3 --manifest "$work/ratis-manifest.jsonl"
container=3 blocks read -t 2 --manifest "$work/ratis-manifest.jsonl"
echo "real-datanode-smoke: loadgen echo (closed and open loop, and over Ratis), write --then-read, write over Ratis and read --manifest against a real Ozone $version DataNode: every request succeeded, every byte verified"
