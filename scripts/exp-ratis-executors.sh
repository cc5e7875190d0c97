#!/usr/bin/env bash
# Experiment "Ratis executors": where a real DataNode's Ratis writes wait, and whether dn-sim
# waits there too, in one run. Every cell is echo as a Raft write (`loadgen echo --ratis
# --read-only=false`, what `freon dn-echo --ratis` sends), 32 workers in all, on a real DataNode
# (scripts/real-datanode.sh, containers 1-4) and then on dn-sim with the same keys:
#
#   one container    32 workers on container 1, sleep 0 and 2 ms. ContainerStateMachine applies a
#                    container's commands one at a time (its task queue), so sleep D gives at
#                    most 1/D calls/s whatever the executors.
#   four containers  four loadgen processes at once, 8 workers each on containers 1-4, sleep 2 ms:
#                    four task queues on the group's op executors (10): up to 4/D.
#   Raft reads       32 workers, container 1, sleep 2 ms, as Raft reads (--read-only): a query
#                    runs on the Ratis server's thread, outside the task queue and the executors.
#   gRPC port        32 workers over the gRPC port, container 1, sleep 2 ms: the gRPC pool (10).
#   op executors 1   a DataNode with hdds.container.ratis.num.container.op.executors=1, four
#                    containers, sleep 2 ms: one thread for the group, 1/D.
#   appender 1       a DataNode with hdds.container.ratis.log.appender.queue.num-elements=1
#                    (HDDS-10890's key, 1024 by default), one container, sleep 0: the queue of a
#                    leader's appends to its followers, which a one-node pipeline does not have.
#   log worker       sleep 0 at one request in flight (1 x 1) and at 32 x 32, one container: the
#                    group's Raft log worker flushes when its queue is empty, so writes in flight
#                    together share a flush. After these cells the real DataNode's /prom gives
#                    its log worker's medians (writelogExecutionTime an entry, flushTime and
#                    syncTime a flush), written as a dn-sim profile's [ratis.log] (the file is
#                    OUT/exp-ratis-executors-log.toml); dn-sim runs the two cells without and with
#                    it.
#
# Each real DataNode gets untimed load after its start (its JIT warms up), each cell its own
# --warmup. Writes OUT/exp-ratis-executors.csv and .md and prints the table.
#
# Usage: scripts/exp-ratis-executors.sh [--duration 4s] [--warmup 2s] [--ozone-version V]
#            [--quick] [--out DIR]
#   --quick   1 s cells, a shorter JVM warm-up; into target/exp-quick
# Environment: LOADGEN, DN_SIM: built binaries to use (default: release builds).
# Exit: 0 done, 2 bad flag, 3 no real DataNode here, 1 a run failed, a cell had failures, or the
# shape broke (one container's 2 ms writes not under 0.6 × four containers' and 0.3 × the gRPC
# port's, or one op executor's not under 0.6 × four containers', on either target; or, on the
# real DataNode and on dn-sim with [ratis.log], 32 × 32 not over 3 × 1 × 1's calls/s; or dn-sim
# with [ratis.log] at 1 × 1 not under 0.7 × dn-sim without it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/lib.sh
. scripts/lib/real-datanode.sh

duration=4s warmup=2s jvm_warmup=15s version=2.2.0 out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) duration="${2:?$1 needs a value}"; shift 2 ;;
        --warmup) warmup="${2:?$1 needs a value}"; shift 2 ;;
        --ozone-version) version="${2:?$1 needs a value}"; shift 2 ;;
        --quick) duration=1s warmup=1s jvm_warmup=3s out="${out:-target/exp-quick}"; shift ;;
        --out) out="${2:?$1 needs a value}"; shift 2 ;;
        -h|--help) sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "exp-ratis-executors.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
out="${out:-results}"
mkdir -p "$out"

harness_setup exp-ratis-executors.sh "$version" || exit $?
release_binaries
loadgen=$LOADGEN dn_sim=$DN_SIM

work="$(mktemp -d "${TMPDIR:-/tmp}/exp-ratis-executors.XXXXXX")"
sim_pid=""
stop_sim() {
    [ -n "$sim_pid" ] || return 0
    kill -TERM "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    sim_pid=""
}
trap 'real_dn_stop; stop_sim; rm -rf "$work"' EXIT
csv="$work/cells.csv"
echo "target,cell,containers,sleep_ms,calls_per_s,p50_ms,p99_ms,failures" >"$csv"

# The DataNode under test: its gRPC and Ratis addresses and its pipeline.
grpc_addr="" ratis_addr="" pipeline=""

# cell TARGET CELL PATH CONTAINERS SLEEP [CLIENTS WORKERS]: CONTAINERS loadgen processes at once
# (32 workers over 8 connections in all unless given, container i for the i-th), PATH ratis
# (Raft writes), ratis-read or grpc; one CSV row with their summed calls/s. (CELL has no comma:
# it is a CSV field.)
cell() {
    local target="$1" name="$2" path="$3" containers="$4" sleep_ms="$5" c pids=()
    local workers=$((${7:-32} / containers)) clients=$(((${6:-8} + containers - 1) / containers))
    echo "  $target $name: $containers × loadgen echo ($path) -t $workers, sleep $sleep_ms ms, $duration" >&2
    for c in $(seq 1 "$containers"); do
        local via
        case "$path" in
            grpc) via=(--target "$grpc_addr") ;;
            ratis) via=(--target "$ratis_addr" --ratis --pipeline-id "$pipeline" --read-only=false) ;;
            ratis-read) via=(--target "$ratis_addr" --ratis --pipeline-id "$pipeline" --read-only=true) ;;
        esac
        "$loadgen" echo "${via[@]}" --clients "$clients" -t "$workers" --duration "$duration" \
            --warmup "$warmup" --sleep-time-ms "$sleep_ms" --container-id "$c" -f --format json \
            --output "$work/cell-$c.json" >/dev/null 2>"$work/cell-$c.err" &
        pids+=($!)
    done
    for c in "${!pids[@]}"; do
        wait "${pids[$c]}" || { cat "$work/cell-$((c + 1)).err" >&2; return 1; }
    done
    python3 - "$target" "$name" "$containers" "$sleep_ms" "$work"/cell-*.json >>"$csv" <<'PY'
import json, sys
target, name, containers, sleep_ms = sys.argv[1:5]
reports = [json.load(open(f)) for f in sys.argv[5:5 + int(containers)]]
rate = sum(r["throughput"]["successes_per_s"] for r in reports)
pct = {p["percentile"]: p["ms"] for p in reports[0]["latency"]["corrected"]["percentiles"]}
failures = sum(r["totals"]["failures"] for r in reports)
print(f"{target},{name},{containers},{sleep_ms},{rate:.1f},{pct[50.0]:.3f},{pct[99.0]:.3f},{failures}")
PY
    rm -f "$work"/cell-*.json
}

start_real() {
    echo "real DataNode $version $*" >&2
    real_dn_start "$work" "$version" --containers 1-4 "$@" ||
        { echo "exp-ratis-executors.sh: the real DataNode did not start" >&2; exit 1; }
    grpc_addr=$dn_addr ratis_addr=$dn_ratis pipeline=$dn_pipeline
    # The JIT compiles the Ratis write path during its first seconds under load: warm it.
    "$loadgen" echo --target "$ratis_addr" --ratis --pipeline-id "$pipeline" --read-only=false \
        --clients 8 -t 32 --duration "$jvm_warmup" --container-id 1 -f >/dev/null 2>&1 || true
}

start_sim() {
    echo "dn-sim $*" >&2
    pipeline=$sim_pipeline
    start_dn_sim "$work/sim.ready" "$dn_sim" --containers 1-4 --pipeline-id "$pipeline" \
        --metrics-listen none "$@" >"$work/sim.log" 2>&1 || { cat "$work/sim.log" >&2; exit 1; }
    sim_pid=$dn_pid grpc_addr=$ready_client
    ratis_addr=$(awk '$1 == "ratis" {print $2}' "$work/sim.ready")
}

stop_target() { real_dn_stop; stop_sim; }
sim_pipeline=5a7e1c0e-0000-4000-8000-000000009858

# log_worker_cells TARGET: the log worker's two cells.
log_worker_cells() {
    cell "$1" "log worker 1x1" ratis 1 0 1 1
    cell "$1" "log worker 32x32" ratis 1 0 32 32
}

# log_profile HTTP PIPELINE FILE: the real DataNode's log worker medians (its /prom, the group
# of PIPELINE) as a dn-sim profile of only [ratis.log]; fails when /prom has no such timers.
log_profile() {
    curl -sf --max-time 10 "http://$1/prom" >"$work/prom.txt" || return 1
    python3 - "$work/prom.txt" "$2" "$version" >"$3" <<'PY'
import os, sys
text, pipeline, version = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
group = "group-" + pipeline.replace("-", "")[-12:].upper()
def median(name):
    for line in text.splitlines():
        if line.startswith(f"ratis_log_worker_{name}{{") and 'quantile="0.5"' in line and f'group="{group}"' in line:
            return float(line.rsplit(" ", 1)[1]) * 1e6
    sys.exit(f"no ratis_log_worker_{name} median for {group} on the DataNode's /prom")
entry, flush, sync = median("writelogExecutionTime"), median("flushTime"), median("syncTime")
print(f"""# dn-sim profile of the real DataNode's Raft log worker (Ozone {version}), written by
# scripts/exp-ratis-executors.sh from its /prom medians: writelogExecutionTime {entry:.1f} us,
# flushTime {flush:.1f} us, syncTime {sync:.1f} us. Only [ratis.log]: every other stage free.
format = "dn-sim-profile/1"
kind = "measured"

[machine]
cores = {os.cpu_count()}
ozone_release = "{version}"

[ratis.log]
per_entry_us = {entry:.3f}
per_flush_us = {max(flush - sync, 0.0):.3f}
sync_us = {sync:.3f}

[fit]
source = "the real DataNode's /prom (ratis_log_worker_* medians), exp-ratis-executors.sh"
""")
PY
}

ops=hdds.container.ratis.num.container.op.executors
appender=hdds.container.ratis.log.appender.queue.num-elements
for target in real dn-sim; do
    start() { if [ "$target" = real ]; then start_real "$@"; else start_sim "$@"; fi; }
    start
    cell "$target" "one container" ratis 1 0
    cell "$target" "one container" ratis 1 2
    cell "$target" "four containers" ratis 4 2
    cell "$target" "Raft reads" ratis-read 1 2
    cell "$target" "gRPC port" grpc 1 2
    log_worker_cells "$target"
    if [ "$target" = real ]; then
        log_profile "$dn_http" "$pipeline" "$work/log.toml" ||
            { echo "exp-ratis-executors.sh: no log worker medians from the real DataNode" >&2; exit 1; }
    fi
    stop_target
    start -D "$ops=1"
    cell "$target" "op executors 1" ratis 4 2
    stop_target
    start -D "$appender=1"
    cell "$target" "appender 1" ratis 1 0
    stop_target
done
start_sim --profile "$work/log.toml" --ozone-version "$version"
log_worker_cells "dn-sim+log"
stop_sim
cp "$work/log.toml" "$out/exp-ratis-executors-log.toml"

cp "$csv" "$out/exp-ratis-executors.csv"
python3 - "$csv" "$out/exp-ratis-executors.md" "$duration" "$warmup" "$version" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
md, duration, warmup, version = sys.argv[2:6]
cells = {(r["target"], r["cell"], int(r["sleep_ms"])): r for r in rows}
bound = {("one container", 2): 500, ("four containers", 2): 2000, ("Raft reads", 2): 16000,
         ("gRPC port", 2): 5000, ("op executors 1", 2): 500}
lines = [f"Echo as a Raft write on a real DataNode {version} and on dn-sim: 32 workers in all, "
         f"{duration} cells after {warmup} warm-up; the bound is the model's "
         "(a container's task queue: 1/sleep; the op executors; reads: 32 workers/sleep; the gRPC pool of 10).", "",
         "| cell | sleep (ms) | model's bound (calls/s) | real calls/s | dn-sim calls/s | real ÷ dn-sim | real p50 (ms) | dn-sim p50 (ms) |",
         "|---|---:|---:|---:|---:|---:|---:|---:|"]
order = []
for r in rows:
    k = (r["cell"], int(r["sleep_ms"]))
    if k not in order:
        order.append(k)
for name, sleep_ms in order:
    real, sim = cells.get(("real", name, sleep_ms)), cells.get(("dn-sim", name, sleep_ms))
    if not real or not sim or name.startswith("log worker"):
        continue
    rr, sr = float(real["calls_per_s"]), float(sim["calls_per_s"])
    b = bound.get((name, sleep_ms))
    lines.append(f"| {name} | {sleep_ms} | {b if b else '—'} | {rr:.0f} | {sr:.0f} | {rr / sr:.2f} | {real['p50_ms']} | {sim['p50_ms']} |")
log_rows = [("log worker 1x1", "1 x 1"), ("log worker 32x32", "32 x 32")]
lines += ["", "The log worker (Raft writes, sleep 0, one container): dn-sim with the real DataNode's "
          "log worker medians as [ratis.log] (exp-ratis-executors-log.toml) beside it.", "",
          "| in flight | real calls/s | dn-sim calls/s | dn-sim with [ratis.log] calls/s | real ÷ dn-sim | real ÷ with [ratis.log] | real p50 (ms) | dn-sim p50 (ms) | with [ratis.log] p50 (ms) |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
for name, label in log_rows:
    real, sim, log = (cells[(t, name, 0)] for t in ("real", "dn-sim", "dn-sim+log"))
    rr, sr, lr = (float(c["calls_per_s"]) for c in (real, sim, log))
    lines.append(f"| {label} | {rr:.0f} | {sr:.0f} | {lr:.0f} | {rr / sr:.2f} | {rr / lr:.2f} | {real['p50_ms']} | {sim['p50_ms']} | {log['p50_ms']} |")
failures = sum(int(float(r["failures"])) for r in rows)
lines += ["", f"failures in all cells: {failures}"]
# The shape the model rests on, on both targets (ratios within one run): one container's writes
# are serial (well under four containers' and the gRPC port's), and so are four containers' on
# one op executor.
broken = []
for target in ("real", "dn-sim"):
    rate = lambda name: float(cells[(target, name, 2)]["calls_per_s"])
    one, four, grpc, single = rate("one container"), rate("four containers"), rate("gRPC port"), rate("op executors 1")
    if not (one < 0.6 * four and one < 0.3 * grpc and single < 0.6 * four):
        broken.append(f"{target}: one container {one:.0f}, four {four:.0f}, gRPC {grpc:.0f}, one op executor {single:.0f} calls/s")
# The log worker's group commit: writes in flight together share flushes, so 32 in flight are
# served several times faster than one, on the real DataNode and on dn-sim that models it; and
# the flushes it models slow a lone write.
rate0 = lambda target, name: float(cells[(target, name, 0)]["calls_per_s"])
for target in ("real", "dn-sim+log"):
    alone, loaded = rate0(target, "log worker 1x1"), rate0(target, "log worker 32x32")
    if not loaded > 3 * alone:
        broken.append(f"{target}: Raft writes at 32 x 32 {loaded:.0f} calls/s, not over 3 x one in flight ({alone:.0f})")
if not rate0("dn-sim+log", "log worker 1x1") < 0.7 * rate0("dn-sim", "log worker 1x1"):
    broken.append("dn-sim+log: one write in flight not slowed by the modelled log worker")
lines += ["", "shape (one container and one op executor serial, on both; Raft writes sharing the log's "
          "flushes, on the real DataNode and on dn-sim with [ratis.log]): " + ("; ".join(broken) if broken else "holds")]
text = "\n".join(lines)
print(text)
open(md, "w").write(text + "\n")
sys.exit(1 if failures or broken else 0)
PY
echo "wrote $out/exp-ratis-executors.csv, .md, -log.toml" >&2
