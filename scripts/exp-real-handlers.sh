#!/usr/bin/env bash
# Experiment "real handlers": HDDS-11224's question on a real DataNode and on dn-sim in one run.
#
# Part A, the gRPC pool. A real DataNode (scripts/real-datanode.sh, one data volume) with
# hdds.datanode.read.chunk.threads.per.volume = 1, 2, 4, 10 (the gRPC server's executor is that ×
# volumes), then dn-sim with the same key; each loaded by `loadgen echo` with 32 connections × 32
# workers (freon's `--clients=32 -t 32`) and --sleep-time-ms 0, 1, 2 (the DataNode sleeps on its
# worker thread). Little's law predicts min(pool, 32) / sleep.
#
# Part B, hdds.datanode.handler.count = 1 versus 10 on the real DataNode: over gRPC (loadgen, sleep
# 0 and 1 ms) and over Ratis (HDDS-11224's own command, `freon dn-echo --ratis --clients 32 -t 32
# --sleep-time-ms 0 --payload-req 0`, the real freon in its own JVM, and `loadgen echo --ratis`
# with the same load: Raft writes, as freon sends); and dn-sim given the same key, over both ports.
#
# Each DataNode gets 15 s of untimed load after its start (its JIT warms up), each cell its own
# --warmup. Writes OUT/exp-real-handlers.csv (every cell), OUT/exp-real-handlers.md (both tables) and
# OUT/exp-real-handlers.svg (calls/s against pool size, a line per target and sleep); prints the
# tables. Takes about 11 minutes (six DataNode starts; a JVM needs its warm-up).
#
# Usage: scripts/exp-real-handlers.sh [--duration 5s] [--warmup 3s] [--ratis-n 20000]
#            [--ozone-version V] [--quick] [--out DIR]
#   --quick   pools 1 and 10, sleeps 0 and 2, 2 s cells, 5,000 Ratis calls; into target/exp-quick
# Environment: LOADGEN, DN_SIM: built binaries to use (default: release builds).
# Exit: 0 done, 2 bad flag, 3 no real DataNode or freon here, 1 a run failed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/lib.sh
. scripts/lib/real-datanode.sh

duration=5s warmup=3s jvm_warmup=15s ratis_n=20000 version=2.2.0 quick=0 out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) duration="${2:?$1 needs a value}"; shift 2 ;;
        --warmup) warmup="${2:?$1 needs a value}"; shift 2 ;;
        --ratis-n) ratis_n="${2:?$1 needs a value}"; shift 2 ;;
        --ozone-version) version="${2:?$1 needs a value}"; shift 2 ;;
        --quick) quick=1; shift ;;
        --out) out="${2:?$1 needs a value}"; shift 2 ;;
        -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "exp-real-handlers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
pools="1 2 4 10"
sleeps="0 1 2"
if [ "$quick" = 1 ]; then
    pools="1 10" sleeps="0 2" duration=2s warmup=1s jvm_warmup=2s ratis_n=5000
    out="${out:-target/exp-quick}"
fi
out="${out:-results}"
mkdir -p "$out"

harness_setup exp-real-handlers.sh "$version" || exit $?
harness_setup exp-real-handlers.sh "$version" --freon || exit $?
if [ -z "${LOADGEN:-}" ] || [ -z "${DN_SIM:-}" ]; then
    cargo build -q --release -p loadgen -p dn-sim
fi
loadgen="${LOADGEN:-target/release/loadgen}"
dn_sim="${DN_SIM:-target/release/dn-sim}"

work="$(mktemp -d "${TMPDIR:-/tmp}/exp-real-handlers.XXXXXX")"
sim_pid=""
stop_sim() {
    [ -n "$sim_pid" ] || return 0
    kill -TERM "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    sim_pid=""
}
trap 'real_dn_stop; stop_sim; rm -rf "$work"' EXIT
csv="$work/cells.csv"
echo "part,target,key,value,path,tool,sleep_ms,calls_per_s,p50_ms,p99_ms,failures" >"$csv"

# echo_cell PART TARGET KEY VALUE ADDR SLEEP [PIPELINE]: one loadgen cell, a CSV row. With
# PIPELINE, ADDR is the Ratis client port and the echoes are Raft writes to that group.
echo_cell() {
    local part="$1" target="$2" key="$3" value="$4" addr="$5" sleep_ms="$6" pipeline="${7:-}"
    local path=grpc via=()
    if [ -n "$pipeline" ]; then
        path=ratis via=(--ratis --pipeline-id "$pipeline" --read-only=false)
    fi
    echo "  $target $key=$value sleep ${sleep_ms} ms: loadgen echo ${pipeline:+--ratis }--clients 32 -t 32 --duration $duration" >&2
    "$loadgen" echo --target "$addr" ${via[@]+"${via[@]}"} --clients 32 -t 32 --duration "$duration" \
        --warmup "$warmup" --sleep-time-ms "$sleep_ms" --payload-req 0 --container-id 1 -f \
        --format json --output "$work/cell.json" \
        >/dev/null 2>"$work/cell.err" || { cat "$work/cell.err" >&2; return 1; }
    python3 - "$work/cell.json" "$part" "$target" "$key" "$value" "$sleep_ms" "$path" >>"$csv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
part, target, key, value, sleep_ms, path = sys.argv[2:8]
pct = {p["percentile"]: p["ms"] for p in r["latency"]["corrected"]["percentiles"]}
print(f"{part},{target},{key},{value},{path},loadgen,{sleep_ms},{r['throughput']['successes_per_s']:.1f},"
      f"{pct[50.0]:.3f},{pct[99.0]:.3f},{r['totals']['failures']}")
PY
}

# ratis_cell TARGET KEY VALUE: HDDS-11224's freon --ratis command, a CSV row.
ratis_cell() {
    local key="$2" value="$3"
    echo "  real $key=$value: freon dn-echo --ratis --clients 32 -t 32 -n $ratis_n" >&2
    freon_cmd "$version" "$work/conf.xml" -- dn-echo --ratis --clients 32 -t 32 -n "$ratis_n" \
        --sleep-time-ms 0 --payload-req 0 --container-id 1
    printf '%q ' "${freon[@]}" >"$work/freon-cmd.sh"
    script -qec "bash $work/freon-cmd.sh" /dev/null >"$work/freon.txt" 2>&1 </dev/null || true
    PYTHONPATH="$root/scripts/lib" python3 - "$work/freon.txt" "$key" "$value" >>"$csv" <<'PY'
import sys
import freon_report
f = freon_report.parse(sys.argv[1], "exp-real-handlers.sh: freon")
print(f"B,real,{sys.argv[2]},{sys.argv[3]},ratis,freon,0,{f['rate']:.1f},{f['p50']:.3f},{f['p99']:.3f},{f['failures']:.0f}")
PY
}

start_real() {
    echo "real DataNode $version, $*" >&2
    real_dn_start "$work" "$version" --containers 1 "$@" || { echo "exp-real-handlers.sh: the real DataNode did not start" >&2; exit 1; }
    # The JIT compiles the DataNode's request path during its first seconds under load: warm it
    # (untimed, answers discarded) so that no cell measures a colder JVM than another.
    "$loadgen" echo --target "$dn_addr" --clients 32 -t 32 --duration "$jvm_warmup" --container-id 1 -f \
        >/dev/null 2>&1 || true
}

start_sim() {
    start_dn_sim "$work/sim.ready" "$dn_sim" --metrics-listen none "$@" >"$work/sim.log" 2>&1 ||
        { cat "$work/sim.log" >&2; exit 1; }
    sim_pid=$dn_pid sim_addr=$ready_client
    sim_ratis=$(awk '$1 == "ratis" {print $2}' "$work/sim.ready")
}

sim_pipeline=5a7e1c0e-0000-4000-8000-000000009858
per_volume=hdds.datanode.read.chunk.threads.per.volume
handler=hdds.datanode.handler.count
for p in $pools; do
    start_real -D "$per_volume=$p"
    for s in $sleeps; do echo_cell A real "$per_volume" "$p" "$dn_addr" "$s"; done
    real_dn_stop
    echo "dn-sim, $per_volume=$p" >&2
    start_sim -D "$per_volume=$p"
    for s in $sleeps; do echo_cell A dn-sim "$per_volume" "$p" "$sim_addr" "$s"; done
    stop_sim
done
# Each handler.count on a DataNode of its own, the same cells in the same order after the same
# warm-up: a JVM's throughput at sleep 0 still grows for a while after its start.
for h in 1 10; do
    start_real -D "$handler=$h"
    for s in 0 1; do echo_cell B real "$handler" "$h" "$dn_addr" "$s"; done
    ratis_cell real "$handler" "$h"
    echo_cell B real "$handler" "$h" "$dn_ratis" 0 "$dn_pipeline"
    real_dn_stop
done
for h in 1 10; do
    echo "dn-sim, $handler=$h" >&2
    start_sim -D "$handler=$h" --pipeline-id "$sim_pipeline"
    for s in 0 1; do echo_cell B dn-sim "$handler" "$h" "$sim_addr" "$s"; done
    echo_cell B dn-sim "$handler" "$h" "$sim_ratis" 0 "$sim_pipeline"
    stop_sim
done

cp "$csv" "$out/exp-real-handlers.csv"
python3 - "$csv" "$out/exp-real-handlers.md" "$duration" "$warmup" "$ratis_n" "$version" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
md, duration, warmup, ratis_n, version = sys.argv[2:7]
a = {(r["target"], int(r["value"]), int(r["sleep_ms"])): r for r in rows if r["part"] == "A"}
lines = [f"Part A: real DataNode {version} vs dn-sim, `hdds.datanode.read.chunk.threads.per.volume` = pool "
         f"(one volume), loadgen echo 32 connections × 32 workers, {duration} cells after {warmup} warm-up.", "",
         "| pool | sleep (ms) | Little's law (calls/s) | real calls/s | dn-sim calls/s | real ÷ dn-sim | real p50 (ms) | dn-sim p50 (ms) | real p99 (ms) | dn-sim p99 (ms) |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for (target, pool, sleep_ms), real in sorted((k, v) for k, v in a.items() if k[0] == "real"):
    sim = a.get(("dn-sim", pool, sleep_ms))
    if not sim:
        continue
    law = f"{min(pool, 32) * 1000 / sleep_ms:.0f}" if sleep_ms else "—"
    rr, sr = float(real["calls_per_s"]), float(sim["calls_per_s"])
    lines.append(f"| {pool} | {sleep_ms} | {law} | {rr:.0f} | {sr:.0f} | {rr / sr:.2f} | {real['p50_ms']} | {sim['p50_ms']} | {real['p99_ms']} | {sim['p99_ms']} |")
lines += ["", f"Part B: `hdds.datanode.handler.count` 1 vs 10, a DataNode each (pool key at its default, 10). gRPC: loadgen echo "
          f"32 × 32, {duration}; Ratis: `freon dn-echo --ratis --clients 32 -t 32 -n {ratis_n} --sleep-time-ms 0 --payload-req 0` "
          f"and `loadgen echo --ratis` 32 × 32, {duration}, Raft writes as freon's.", "",
          "| target | path (tool) | sleep (ms) | handler.count 1: calls/s | handler.count 10: calls/s | 10 ÷ 1 | p50 1 → 10 (ms) | p99 1 → 10 (ms) |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
b = {(r["target"], r["path"], r["tool"], int(r["sleep_ms"]), int(r["value"])): r for r in rows if r["part"] == "B"}
for key in sorted({k[:4] for k in b}):
    one, ten = b.get(key + (1,)), b.get(key + (10,))
    if not one or not ten:
        continue
    o, t = float(one["calls_per_s"]), float(ten["calls_per_s"])
    lines.append(f"| {key[0]} | {key[1]} ({key[2]}) | {key[3]} | {o:.0f} | {t:.0f} | {t / o:.2f} | {one['p50_ms']} → {ten['p50_ms']} | {one['p99_ms']} → {ten['p99_ms']} |")
failures = sum(int(float(r["failures"])) for r in rows)
lines += ["", f"failures in all cells: {failures}"]
text = "\n".join(lines)
print(text)
open(md, "w").write(text + "\n")
PY
# The chart: calls/s against pool size, one line per target and sleep.
"$loadgen" plot --csv "$out/exp-real-handlers.csv" --where part=A --x value --y calls_per_s \
    --series target,sleep_ms --log-x --log-y \
    --title "Echo calls/s vs gRPC pool (read.chunk.threads.per.volume), real DataNode $version vs dn-sim, 32 x 32" \
    --x-label "pool (threads)" --y-label "calls/s" -o "$out/exp-real-handlers.svg" >&2
echo "wrote $out/exp-real-handlers.csv, .md, .svg" >&2
