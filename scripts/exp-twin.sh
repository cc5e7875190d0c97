#!/usr/bin/env bash
# Experiment "twin": calibrate dn-sim on a real Ozone DataNode, then test its predictions on cells
# the fit never saw, real and dn-sim in one run.
#
# 1. Fit. A real DataNode (scripts/real-datanode.sh, one volume) restarted with
#    hdds.datanode.read.chunk.threads.per.volume (the gRPC pool) = 2 and 10, --starts times each
#    (a real DataNode's JVM starts differ from each other by more than the goals:
#    scripts/exp-real-starts.sh); on each start `loadgen calibrate --pool P` measures echoes
#    (0 B, 1 MiB responses) and WriteChunks (64 KB, 1 MB, 4 MB) at one request in flight and
#    0 B echoes at 4, 8 and 32 in flight (32 connections at most), 1 MiB echoes and 1 MB and
#    64 KB WriteChunks with 8, and 0 B echoes that sleep 1 and 5 ms at 32 in flight, each cell
#    3 runs of 3 s after 1 s (the median kept); a dn-sim without a profile (pool 10) is the
#    per-byte baseline. The cells of both pools are fitted
#    into the profile (kind "measured"), a cell of several starts as their geometric mean; the
#    baseline runs the loaded cells too at each pool:
#    the machine's CPU per call on both gives the CPU stage (a WriteChunk's own cost beyond
#    its bytes from the two sizes of loaded writes), the sleeping echoes how late the
#    real DataNode's handler wakes from a sleep (their calls/s) and how few wake much later
#    still (their p99, the sleep's tail). The fit is then checked on the dn-sim the
#    validation runs (this dn-sim binary and its flags, a process of its own: --check-on; no
#    real DataNode running), cells as long as the fit's, up to 4 rounds each (the round nearest
#    the real DataNode kept): the loaded 0 B echoes at each pool (the loop's and the handler's costs
#    scaled by dn-sim's calls/s over the real DataNode's where each limits the model), the 1 MiB
#    echo at one request in flight (what dn-sim's handler spends beyond the real DataNode's
#    latency moves to the background), the loaded echo the payload lock was priced on, the 0 B
#    echo at one request in flight (the latency floor and its jitter).
# 2. Validation, cells the fit did not see, on the real DataNode and on dn-sim --profile (the
#    same pool key given to dn-sim, which derives the same event loops):
#    - the handler experiment: pools 1, 4, 16, `loadgen echo` 32 connections x 32 workers,
#      --sleep-time-ms 0, 1, 2;
#    - the HDDS-10442 payload table at pool 16: responses of 0 B, 1 MiB, 10 MiB x 1, 8, 32
#      workers (as many connections);
#    - `loadgen write` of 64 KB, 1 MB and 4 MB chunks with 4 workers at pool 16 (MB/s);
#    Per pool the two run side by side; each cell runs on the real DataNode, then on dn-sim,
#    the one not measured paused (SIGSTOP; an idle DataNode's JVM took 6 % from dn-sim's 1 MiB
#    echoes beside it, and the calibration's checks run with no real DataNode up), and the
#    pool's cells go round --repeats times (default 6), so both see the same minutes of this
#    shared machine, the rounds divided among --starts starts of the real DataNode (dn-sim
#    restarted with it); the table takes medians and shows the real DataNode's own spread,
#    between rounds and between starts; its ratios are each round's real / dn-sim (a pair run
#    back to back), the median of the rounds.
#    After pool 16's rounds the fit's loaded cells (1 MiB echoes and 1 MB writes, 8 x 8) run
#    once more on the real DataNode: the table's header sets them beside the calibration's, the
#    machine's drift over the run (dn-sim's burns take a fixed CPU time and do not follow it).
# Each DataNode gets untimed load after its start until its JIT has settled (3 s runs of 0 B
# echoes, 32 x 32, at least 6, until three in a row lie within 5 %, at most 15; then 3000 1 MiB
# echoes at 8 x 8 and 3 s runs of them until three in a row lie within 5 %, at most 8; the
# calls/s of each run go in the table's header), each cell its own --warmup. The
# dn-sims keep no chunk data (--store discard; the real DataNode writes to its disk) and advertise
# the real DataNode's HTTP/2 windows and frame size.
# Writes OUT/exp-twin.csv (every run of every cell), OUT/exp-twin.md (per cell the medians of
# calls/s or MB/s, p50 and p99 on each, real / dn-sim (the median of the rounds' pairs), the real
# DataNode's spread between rounds, the share of each cell its JVM spent in GC pauses (its
# /prom), and whether the cell meets the goals: calls/s and MB/s within 10 % and 15 %, p50 15 %,
# p99 25 %; a missed cell says by how much, whether the real DataNode itself varied more than
# the goal, and its GC share from 2 %),
# OUT/exp-twin.svg (dn-sim's prediction against the real measurement, one point per cell,
# the +/-10 % band), and the profile to PROFILE. Takes about 70 minutes.
#
# Usage: scripts/exp-twin.sh [--quick] [--duration 4s] [--warmup 1s] [--repeats 6] [--starts 2]
#                            [--out DIR] [--profile FILE] [--heap SIZE]
#   --duration, --warmup, --repeats: of the validation cells (the fit's: 3 runs of 3 s after 1 s).
#   --starts  real DataNode starts per pool, in the fit and in the validation (at most --repeats).
#   --heap    the real DataNode's maximum heap (scripts/real-datanode.sh --heap); default
#             `default`: the JVM's own, a quarter of the machine's memory, which is what Ozone's
#             launcher gives a DataNode when OZONE_HEAPSIZE_MAX is unset (with the harness's
#             1g, 32 answers of 10 MiB in flight kept its JVM in GC: 5.7-6.4 calls/s against
#             7.1-7.7 with the default, Ozone 2.2.0 here).
#   --quick   one DataNode (pool 10, one start, no JIT warm-up): a calibration of 0.5 s cells, then the
#             profile (checked on dn-sim) loaded by dn-sim, its stages on /prom, and 2 cells of 1 s on both
#             (echo sleep 2 ms, write 1 MB with 4 workers: not in the fit, but at the fit's
#             pool; each paused while the other runs, so the real DataNode's write follows a
#             pause; its GC time read from its /prom): checks the pipeline,
#             predicts nothing; into target/exp-twin-quick.
# Defaults: --out results, --profile deploy/profiles/measured-2cores-ozone-2.2.0.toml
# Environment: LOADGEN, DN_SIM: built binaries to use (default: release builds).
# Exit: 0 done (goals met or not: the table says), 2 bad flag, 3 no Maven Central for the
# harness, 1 a run failed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/lib.sh
. scripts/lib/real-datanode.sh

duration=4s warmup=1s repeats=6 starts=2 jvm_warmup=1 version=2.2.0 quick=0 out="" profile="" heap=default
# Unmeasured 1 MiB echoes before a real DataNode's cells (warm_real; in --quick,
# calibrate's own warm-up, shortened, since the quick run warms nothing else).
warm_calls=3000 cal_warm_calls=0
cal_duration=3s cal_warmup=1s cal_rounds=3
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) duration="${2:?$1 needs a value}"; shift 2 ;;
        --warmup) warmup="${2:?$1 needs a value}"; shift 2 ;;
        --repeats) repeats="${2:?$1 needs a value}"; shift 2 ;;
        --starts) starts="${2:?$1 needs a value}"; shift 2 ;;
        --out) out="${2:?$1 needs a value}"; shift 2 ;;
        --profile) profile="${2:?$1 needs a value}"; shift 2 ;;
        --quick) quick=1; shift ;;
        --heap) heap="${2:?$1 needs a value}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "exp-twin.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "exp-twin.sh: --repeats: '$repeats' is not a count of 1 or more" >&2; exit 2; }
[[ $starts =~ ^[1-9][0-9]*$ ]] || { echo "exp-twin.sh: --starts: '$starts' is not a count of 1 or more" >&2; exit 2; }
[ "$starts" -le "$repeats" ] || { echo "exp-twin.sh: --starts: $starts starts need at least as many --repeats (rounds), got $repeats" >&2; exit 2; }
[[ $heap == default || $heap =~ ^[1-9][0-9]*[kKmMgG]?$ ]] ||
    { echo "exp-twin.sh: --heap: '$heap' is not a size such as 6g, or default" >&2; exit 2; }
if [ "$quick" = 1 ]; then
    cal_duration=500ms cal_warmup=200ms cal_rounds=1 duration=1s warmup=300ms jvm_warmup=0 repeats=1 starts=1 cal_warm_calls=50
    out="${out:-target/exp-twin-quick}"
fi
out="${out:-results}"
[ -n "$profile" ] || { [ "$quick" = 1 ] && profile="$out/measured-2cores-ozone-2.2.0.toml" || profile=deploy/profiles/measured-2cores-ozone-2.2.0.toml; }
mkdir -p "$out" "$(dirname "$profile")"
# The real DataNode keeps what pool 16's write cells write until its rounds end (3 cells a round
# and the drift cell, up to about 0.5 GB/s here; a run of 6 rounds filled the disk at round 5):
# a run without room stops here, not 40 minutes in.
if [ "$quick" = 0 ]; then
    need_gb=$(python3 - "$repeats" "$duration" "$warmup" <<'PY'
import re, sys
def secs(d):
    m = re.fullmatch(r"([0-9.]+)(ms|s|m)", d)
    return 0.0 if not m else float(m[1]) * {"ms": 1e-3, "s": 1.0, "m": 60.0}[m[2]]
print(int((3 * int(sys.argv[1]) + 1) * (secs(sys.argv[2]) + secs(sys.argv[3])) * 0.5) + 1)
PY
)
    free_gb=$(df -Pk "${TMPDIR:-/tmp}" | awk 'NR == 2 { print int($4 / 1048576) }')
    [ "$free_gb" -ge "$need_gb" ] || {
        echo "exp-twin.sh: the real DataNode's writes need about $need_gb GB free under ${TMPDIR:-/tmp} ($free_gb GB free): free some, or lower --repeats or --duration" >&2
        exit 1
    }
fi

harness_setup exp-twin.sh "$version" || exit $?
# The heap the table's header names: the JVM's ergonomic choice when no -Xmx is given.
heap_note="$heap"
if [ "$heap" = default ]; then
    heap_note="the JVM's default, $(java -XX:+UseG1GC -XX:+PrintFlagsFinal -version 2>/dev/null |
        awk '$2 == "MaxHeapSize" { printf "%.1f GiB", $4 / 2^30 }')"
fi
if [ -z "${LOADGEN:-}" ] || [ -z "${DN_SIM:-}" ]; then
    cargo build -q --release -p loadgen -p dn-sim
fi
loadgen="${LOADGEN:-target/release/loadgen}"
dn_sim="${DN_SIM:-target/release/dn-sim}"

work="$(mktemp -d "${TMPDIR:-/tmp}/exp-twin.XXXXXX")"
sim_pid="" base_pid=""
stop_pid() { [ -n "$1" ] || return 0; kill -CONT "$1" 2>/dev/null || true; kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
stop_sim() { stop_pid "$sim_pid"; sim_pid=""; }
trap 'real_dn_stop; stop_sim; stop_pid "$base_pid"; rm -rf "$work"' EXIT
csv="$work/cells.csv"
echo "group,cell,pool,sleep_ms,kind,bytes,clients,threads,target,value,unit,p50_ms,p99_ms,failures,round,gc_ms,wall_s,start" >"$csv"
round=1 start=1
per_volume=hdds.datanode.read.chunk.threads.per.volume
# Echoes address container 1. Each write run gets a container of its own, in the fit (calibrate
# --write-containers: 10 write runs a round, the target's and the baseline's) and in each validation
# write cell: the real DataNode asks SCM to close a container once it holds its size (64 MB in the
# harness), and writes to it then fail (a calibration writing all its runs to one container met
# CLOSED_CONTAINER_IO two minutes in).
containers=$((2 + 3 * repeats > 1 + 10 * cal_rounds ? 2 + 3 * repeats : 1 + 10 * cal_rounds)) container=1 next_container=2
jit_warmups=""  # per DataNode start: the warm-up runs' calls/s, for the table's header
# The real DataNode's HTTP/2 receive settings (grpc-java on Netty: 1 MiB windows, 16 KiB frames),
# on every dn-sim here: a client sends a chunk to the twin as it does to the DataNode.
dn_wire=(--http2-stream-window 1MB --http2-connection-window 1MB --http2-max-frame-size 16KB)

start_real() {
    echo "real DataNode $version, $per_volume=$1, start $start of $starts" >&2
    real_dn_start "$work" "$version" --containers "1-$containers" --heap "$heap" -D "$per_volume=$1" ||
        { echo "exp-twin.sh: the real DataNode did not start" >&2; exit 1; }
    [ "$jvm_warmup" = 0 ] || warm_real "$1"
}

# warm_real POOL: untimed load on the DataNode just started until its JIT has settled
# (real_dn_warm); its runs go in the table's header.
warm_real() {
    local runs
    runs="$(real_dn_warm "$loadgen" "$work" "$warm_calls")"
    echo "  JIT warm-up, calls/s: $runs" >&2
    jit_warmups="$jit_warmups${jit_warmups:+; }pool $1 start $start: $runs"
}

start_sim() { # POOL [args]
    local pool=$1
    shift
    start_dn_sim "$work/sim.ready" "$dn_sim" -D "$per_volume=$pool" --containers "1-$containers" --store discard "${dn_wire[@]}" "$@" >"$work/sim.log" 2>&1 ||
        { cat "$work/sim.log" >&2; exit 1; }
    sim_pid=$dn_pid sim_addr=$ready_client sim_admin=$ready_admin
}

# cell GROUP POOL TARGET ADDR KIND BYTES CLIENTS THREADS SLEEP: one loadgen run, a CSV row.
cell() {
    local group=$1 pool=$2 target=$3 addr=$4 kind=$5 bytes=$6 clients=$7 threads=$8 sleep_ms=$9
    local args=(--target "$addr" --clients "$clients" -t "$threads" --duration "$duration" --warmup "$warmup"
        --container-id "$container" -f --format json --output "$work/cell.json")
    if [ "$kind" = echo ]; then
        args=(echo "${args[@]}" --payload-resp $((bytes / 1024)) --sleep-time-ms "$sleep_ms")
    else
        args=(write "${args[@]}" --write-size $((bytes / 1024))KB --chunk-size $((bytes / 1024))KB)
    fi
    echo "  $target pool $pool: loadgen ${args[*]:0:1} bytes=$bytes ${clients}x$threads sleep=$sleep_ms" >&2
    rm -f "$work/cell.json"
    # The real DataNode's JVM: its GC pauses during the cell (warm-up included), from its /prom.
    local gc0="" gc1="" t0 t1
    if [ "$target" = real ]; then gc0="$(real_dn_gc_ms)"; fi
    t0=$(date +%s%N)
    # A cell with failed requests still has its report (the failures are in the table).
    "$loadgen" "${args[@]}" </dev/null >/dev/null 2>"$work/cell.err" || [ -s "$work/cell.json" ] ||
        { cat "$work/cell.err" >&2; return 1; }
    t1=$(date +%s%N)
    if [ "$target" = real ]; then gc1="$(real_dn_gc_ms)"; fi
    PYTHONPATH="$root/scripts/lib" python3 - "$work/cell.json" "$group" "$pool" "$sleep_ms" "$kind" "$bytes" "$clients" \
        "$threads" "$target" "$round" "$gc0" "$gc1" "$t0" "$t1" "$start" >>"$csv" <<'PY'
import json, sys
from loadgen_cell import figures, size
group, pool, sleep_ms, kind, nbytes, clients, threads, target, rnd, gc0, gc1, t0, t1, start = sys.argv[2:16]
r, value, unit, p50, p99 = figures(sys.argv[1], kind)
if r["totals"]["failures"]:
    print(f"    {r['totals']['failures']} failure(s): {json.dumps(r.get('errors'))[:300]}", file=sys.stderr)
gc_ms = f"{float(gc1) - float(gc0):.0f}" if gc0 and gc1 else ""
wall_s = (int(t1) - int(t0)) / 1e9
if kind == "echo":
    name = f"echo pool={pool} sleep={sleep_ms}ms resp={size(nbytes)} {clients}x{threads}"
else:
    name = f"write pool={pool} chunk={size(nbytes)} {clients}x{threads}"
print(f"{group},{name},{pool},{sleep_ms},{kind},{nbytes},{clients},{threads},{target},{value:.2f},{unit},"
      f"{p50:.3f},{p99:.3f},{r['totals']['failures']},{rnd},{gc_ms},{wall_s:.2f},{start}")
PY
}

# 1. Fit.
start_dn_sim "$work/base.ready" "$dn_sim" --metrics-listen none --store discard --handler-count 10 --containers "1-$containers" "${dn_wire[@]}" >"$work/base.log" 2>&1 ||
    { cat "$work/base.log" >&2; exit 1; }
base_pid=$dn_pid base_addr=$ready_client
fit_pools="2 10"
[ "$quick" = 1 ] && fit_pools=10
with=()
baseline=(--baseline "$base_addr" --baseline-pool 10)
rm -f "$out"/exp-twin-fit-pool*.json
for p in $fit_pools; do
    for ((start = 1; start <= starts; start++)); do
        start_real "$p"
        cells="$out/exp-twin-fit-pool$p-start$start.json"
        "$loadgen" calibrate --target "$dn_addr" --pool "$p" ${baseline[@]+"${baseline[@]}"} --duration "$cal_duration" \
            --warmup "$cal_warmup" --rounds "$cal_rounds" --warm-up-calls "$cal_warm_calls" --write-containers "2-$containers" \
            --cells-out "$cells" >/dev/null 2>"$work/cal.err" ||
            { cat "$work/cal.err" >&2; exit 1; }
        grep 'loadgen calibrate:' "$work/cal.err" >&2 || true
        with+=(--with "$cells")
        [ "$quick" = 1 ] || real_dn_stop
    done
done
start=1
stop_pid "$base_pid"; base_pid=""
# The fit, checked on dn-sim processes as the validation runs them (binary and flags), with
# cells as long as the fit's; in --quick the real DataNode is still up, paused meanwhile.
real_dn_pause
"$loadgen" calibrate "${with[@]}" --release "$version" --out "$profile" --duration "$cal_duration" \
    --warmup "$cal_warmup" --rounds "$cal_rounds" --check-rounds 4 --check-on "$dn_sim ${dn_wire[*]}" \
    >"$out/exp-twin-fit.md" 2>"$work/cal.err" || { cat "$work/cal.err" >&2; exit 1; }
real_dn_resume
grep -q 'check round 1 on a dn-sim process' "$work/cal.err" ||
    { cat "$work/cal.err" >&2; echo "exp-twin.sh: the profile was not checked on a dn-sim process" >&2; exit 1; }
cat "$out/exp-twin-fit.md" >&2

# The profile loads in dn-sim, and each stage it prices reports on /prom after a little load
# (a stage that costs nothing does not exist, and has no series).
start_sim 10 --profile "$profile"
"$loadgen" echo --target "$sim_addr" -n 200 --clients 2 -t 2 --container-id 1 >/dev/null 2>&1 ||
    { echo "exp-twin.sh: dn-sim --profile $profile did not serve echoes" >&2; exit 1; }
prom="$(curl -sf "http://$sim_admin/prom")"
stages="$(python3 - "$profile" <<'PY'
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))
costs = lambda t: any(v for part in t.values() for v in part.values())
if costs(p.get("event_loops", {})): print("dn_sim_event_loops dn_sim_event_loop_connections dn_sim_event_loop_service_seconds_count")
if costs(p.get("handler", {})): print("dn_sim_handler_service_seconds_count")
cpu = {k: v for k, v in p.get("cpu", {}).items() if k in ("handler", "background")}
if costs(cpu): print("dn_sim_cpu_burn_seconds_count dn_sim_cpu_background_debt_seconds")
if costs(cpu) and "capacity" in p.get("cpu", {}): print("dn_sim_cpu_capacity_wait_seconds_count")
if any(p.get("latency", {}).values()): print("dn_sim_latency_floor_wait_seconds_count")
PY
)"
[ -n "$stages" ] || { echo "exp-twin.sh: $profile prices no stage" >&2; exit 1; }
for series in $stages; do
    grep -q "^$series" <<<"$prom" || { echo "exp-twin.sh: dn-sim --profile $profile: no $series on /prom" >&2; exit 1; }
done
if grep -q '^dn_sim_event_loops' <<<"$prom"; then
    grep -q '^dn_sim_event_loops 1$' <<<"$prom" || { echo "exp-twin.sh: dn-sim at pool 10 does not report 1 event loop" >&2; exit 1; }
fi
echo "dn-sim --profile: stage series on /prom: $stages" | tr '\n' ' ' >&2; echo >&2
# A CPU stage with a cost per response byte was checked on dn-sim (loadgen calibrate's check).
if grep -q '^dn_sim_cpu_burn_seconds' <<<"$stages" && ! grep -q '^# Checked on dn-sim: ' "$profile"; then
    echo "exp-twin.sh: $profile has a CPU stage but no check on dn-sim" >&2; exit 1
fi
stop_sim

# 2. Validation.
# pair_cell GROUP POOL KIND BYTES CLIENTS THREADS SLEEP: the cell on the real DataNode with dn-sim
# paused, then on dn-sim with the real DataNode paused.
pair_cell() {
    kill -STOP "$sim_pid"
    cell "$1" "$2" real "$dn_addr" "${@:3}"
    kill -CONT "$sim_pid"
    real_dn_pause
    cell "$1" "$2" dn-sim "$sim_addr" "${@:3}"
    real_dn_resume
}
if [ "$quick" = 1 ]; then
    # The DataNode of the fit is still running (pool 10); its write follows a pause.
    start_sim 10 --profile "$profile"
    pair_cell quick 10 echo 0 32 32 2
    pair_cell quick 10 write $((1 << 20)) 4 4 0
    real_dn_stop
    stop_sim
else
    # Each pool: the real DataNode and dn-sim run side by side (the one not measured paused), and
    # each cell runs on the real one, then on dn-sim, --repeats times round the pool's cells: the
    # machine's drift falls on both alike, and the medians and the real DataNode's own spread
    # come from the same minutes.
    pool_cells() { # POOL: "kind bytes clients threads sleep" lines, and the group first
        local p=$1 s n b
        for s in 0 1 2; do echo "handlers echo 0 32 32 $s"; done
        [ "$p" = 16 ] || return 0
        for b in 0 $((1 << 20)) $((10 << 20)); do
            for n in 1 8 32; do echo "payload echo $b $n $n 0"; done
        done
        for b in $((64 << 10)) $((1 << 20)) $((4 << 20)); do echo "write write $b 4 4 0"; done
    }
    for p in 1 4 16; do
        for ((start = 1; start <= starts; start++)); do
            start_real "$p"
            start_sim "$p" --profile "$profile"
            # This start's rounds: the repeats divided among the starts in blocks.
            for ((round = 1; round <= repeats; round++)); do
                (((round - 1) * starts / repeats + 1 == start)) || continue
                echo "pool $p: round $round of $repeats (start $start)" >&2
                while read -r group kind bytes clients threads sleep_ms; do
                    container=1
                    [ "$kind" = write ] && { container=$next_container; next_container=$((next_container + 1)); }
                    pair_cell "$group" "$p" "$kind" "$bytes" "$clients" "$threads" "$sleep_ms"
                done < <(pool_cells "$p")
            done
            if [ "$p" = 16 ] && [ "$start" = "$starts" ]; then
                # The machine's drift over the run: the fit's loaded cells again on the real DataNode
                # (one event loop at pools 10 and 16, and 8 requests in flight under either pool).
                echo "pool $p: the fit's loaded cells again (drift)" >&2
                container=1
                cell drift "$p" drift "$dn_addr" echo $((1 << 20)) 8 8 0
                container=$next_container
                cell drift "$p" drift "$dn_addr" write $((1 << 20)) 8 8 0
            fi
            real_dn_stop
            stop_sim
        done
    done
fi

cp "$csv" "$out/exp-twin.csv"
python3 - "$csv" "$out/exp-twin.md" "$out/exp-twin.svg" "$duration" "$warmup" "$version" "$profile" "$quick" "$jit_warmups" "$heap_note" "$starts" \
    "$out"/exp-twin-fit-pool10-start*.json <<'PY'
import csv, json, math, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
md, svg, duration, warmup, version, profile, quick, jit_warmups, heap, starts = sys.argv[2:12]
fit_files = sys.argv[12:]  # the fit's cells at pool 10, one file a start
def f(x):
    try:
        return float(x)
    except ValueError:
        return float("nan")
cells = {}  # cell -> target -> its runs (one per round)
for r in rows:
    cells.setdefault(r["cell"], {}).setdefault(r["target"], []).append(r)
def median(runs, key):
    vals = sorted(f(r[key]) for r in runs)
    return statistics.median(vals) if vals else float("nan")
def paired(real, sim, key):
    # A round runs a cell on the real DataNode and at once on dn-sim: real ÷ dn-sim of each such
    # pair shares the machine's state of those seconds, which drifts between rounds by more than
    # the goals (a noisy shared machine), so the ratio is the median of the pairs' ratios.
    sims = {(r["group"], r["round"]): f(r[key]) for r in sim}
    ratios = [f(r[key]) / sims[(r["group"], r["round"])] for r in real
              if sims.get((r["group"], r["round"]), 0) > 0]
    return statistics.median(ratios) if ratios else float("nan")
rounds = max((int(r["round"]) for r in rows if r["target"] != "drift"), default=1)  # the drift cell is a round of its own
# The drift: the fit's loaded cells at pool 10 (calibration) against the same cells on the real
# DataNode at pool 16 after the validation; dn-sim's burns take a fixed CPU time, so a machine
# slower in the validation than in the calibration leaves dn-sim fast where the CPU is the limit.
drift = []
fitted = []  # each start's cells
for path in fit_files:
    try:
        fitted.append(json.load(open(path))["cells"])
    except (OSError, ValueError, KeyError):
        pass
for r in (r for r in rows if r["target"] == "drift"):
    kind, nbytes = r["kind"], int(r["bytes"])
    then = [c["calls_per_s"] if kind == "echo" else c["mb_per_s"] for cells_of_start in fitted for c in cells_of_start
            if not c.get("baseline") and c["kind"] == kind and c["threads"] == int(r["threads"])
            and (c["resp_bytes"] if kind == "echo" else c["req_bytes"]) == nbytes]
    if then:
        # The fit took the geometric mean of the starts.
        was = math.exp(sum(math.log(v) for v in then) / len(then))
        drift.append(f"{r['cell'].replace('pool=16 ', '')} {was:.1f} ({' '.join(f'{v:.1f}' for v in then)}) "
                     f"then {f(r['value']):.1f} {r['unit']} ({f(r['value']) / was:.2f})")
lines = [f"Real Ozone {version} DataNode (maximum heap: {heap}) vs dn-sim --profile {profile}, same machine, one run; "
         f"{duration} cells after {warmup} warm-up, each on the real DataNode then on dn-sim, "
         f"{rounds} round(s) over {starts} start(s) of the real DataNode a pool; the medians of the rounds"
         f"{' (QUICK: one pool, not a validation)' if quick == '1' else ''}.",
         "Goals: calls/s within ±10 % (MB/s ±15 % for writes), p50 ±15 %, p99 ±25 %. "
         "ratio = real ÷ dn-sim of each round (its real and dn-sim runs back to back), the median of the rounds. "
         "real spread = the real DataNode's highest round ÷ its lowest (over its starts); "
         "real starts = its highest start's median ÷ its lowest start's (no one prediction lies within ±10 % of "
         "both once they differ by 1.22 ×). "
         "real GC = the share of the cell's time (warm-up included) the real DataNode's JVM spent in GC pauses "
         "(jvm_metrics_gc_time_millis on its /prom, the median of the rounds); dn-sim has no GC.",
         *([f"JIT warm-up of each real DataNode start (3 s runs of 0 B echoes, 32 x 32, at least 6, until three in a "
            f"row lie within 5 %, at most 15, then 1 MiB echoes at 8 x 8, 3 s runs until three in a row lie within 5 %, "
            f"at most 8; calls/s): {jit_warmups}."] if jit_warmups else []),
         *([f"The machine's drift over the run, the fit's loaded cells on the real DataNode in the calibration "
            f"(pool 10) then after the validation (pool 16; one event loop at either): {'; '.join(drift)}."]
           if drift else []), "",
         "| cell | unit | real | real spread | real starts | real GC | dn-sim | ratio | real p50 (ms) | dn-sim p50 (ms) | p50 ratio | real p99 (ms) | dn-sim p99 (ms) | p99 ratio | goals |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
points, met, total, noisy = [], 0, 0, 0
for name, t in cells.items():
    real, sim = t.get("real"), t.get("dn-sim")
    if not real or not sim:
        continue
    unit = real[0]["unit"]
    rv, sv = median(real, "value"), median(sim, "value")
    r50, s50, r99, s99 = median(real, "p50_ms"), median(sim, "p50_ms"), median(real, "p99_ms"), median(sim, "p99_ms")
    shares = [f(r["gc_ms"]) / (1e3 * f(r["wall_s"])) for r in real if r["gc_ms"] and f(r["wall_s"]) > 0]
    gc = statistics.median(shares) if shares else float("nan")
    vals = [f(r["value"]) for r in real]
    spread = max(vals) / min(vals) if min(vals) > 0 else float("nan")
    by_start = {}
    for r in real:
        by_start.setdefault(r["start"], []).append(f(r["value"]))
    start_medians = [statistics.median(v) for v in by_start.values()]
    starts_spread = max(start_medians) / min(start_medians) if len(start_medians) > 1 and min(start_medians) > 0 else float("nan")
    ratio, p50, p99 = paired(real, sim, "value"), paired(real, sim, "p50_ms"), paired(real, sim, "p99_ms")
    tol = 0.15 if unit == "MB/s" else 0.10
    misses = []
    if not abs(ratio - 1) <= tol: misses.append(f"{unit} {100 * (ratio - 1):+.0f} %")
    if not abs(p50 - 1) <= 0.15: misses.append(f"p50 {100 * (p50 - 1):+.0f} %")
    if not abs(p99 - 1) <= 0.25: misses.append(f"p99 {100 * (p99 - 1):+.0f} %")
    verdict = "met" if not misses else "missed: " + ", ".join(misses)
    if misses and len(real) > 1 and spread - 1 > tol:
        verdict += f"; the real DataNode's own rounds differ by {100 * (spread - 1):.0f} %"
        noisy += 1
    if misses and starts_spread > (1 + tol) / (1 - tol):
        verdict += f"; the real DataNode's starts differ by {100 * (starts_spread - 1):.0f} %"
    if misses and gc >= 0.02:
        verdict += f"; the real DataNode's JVM was in GC pauses {100 * gc:.0f} % of the time"
    total += 1
    met += not misses
    gc_text = "–" if math.isnan(gc) else f"{100 * gc:.1f} %"
    lines.append(f"| {name} | {unit} | {rv:.1f} | {spread:.2f} | {'–' if math.isnan(starts_spread) else f'{starts_spread:.2f}'} | {gc_text} | {sv:.1f} | {ratio:.2f} | {r50:.3f} | {s50:.3f} | {p50:.2f} | "
                 f"{r99:.3f} | {s99:.3f} | {p99:.2f} | {verdict} |")
    points.append((name, rv, sv, ratio))
failures = sum(int(f(r["failures"])) for r in rows)
lines += ["", f"cells meeting every goal: {met} of {total}; missed cells where the real DataNode's own rounds "
          f"differ by more than the calls/s (MB/s) goal: {noisy}; failures in all runs: {failures}"]
text = "\n".join(lines)
print(text)
open(md, "w").write(text + "\n")
unmeasured = [r["cell"] for r in rows if r["target"] == "real" and not r["gc_ms"]]
if unmeasured:
    sys.exit(f"exp-twin.sh: no GC time from the real DataNode's /prom for {', '.join(sorted(set(unmeasured)))}")
# The chart: dn-sim's prediction (y) against the real measurement (x), log-log, the ±10 % band.
W, H, L, B, T, R = 760, 600, 80, 60, 40, 30
vals = [v for _, a, b, _ in points for v in (a, b) if v > 0]
lo, hi = (min(vals) / 1.5, max(vals) * 1.5) if vals else (1, 10)
def sx(v): return L + (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (W - L - R)
def sy(v): return H - B - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (H - B - T)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">dn-sim --profile vs real Ozone {version} DataNode, one point per cell (calls/s or MB/s)</text>']
band = " ".join(f"{sx(v):.1f},{sy(min(hi, v * 1.1)):.1f}" for v in (lo, hi)) + " " + \
       " ".join(f"{sx(v):.1f},{sy(max(lo, v / 1.1)):.1f}" for v in (hi, lo))
out.append(f'<polygon points="{band}" fill="#cde" stroke="none"/>')
out.append(f'<line x1="{sx(lo):.1f}" y1="{sy(lo):.1f}" x2="{sx(hi):.1f}" y2="{sy(hi):.1f}" stroke="#468" stroke-dasharray="4,3"/>')
out.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - B - T}" fill="none" stroke="black"/>')
d = 10 ** math.floor(math.log10(lo))
while d <= hi:
    for m in (1, 2, 5):
        v = d * m
        if lo <= v <= hi:
            out.append(f'<text x="{sx(v):.1f}" y="{H - B + 16}" text-anchor="middle">{v:g}</text>')
            out.append(f'<text x="{L - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    d *= 10
out.append(f'<text x="{(L + W - R) / 2}" y="{H - 15}" text-anchor="middle">measured on the real DataNode</text>')
out.append(f'<text x="20" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 20 {(T + H - B) / 2})">predicted by dn-sim --profile</text>')
out.append(f'<text x="{L + 10}" y="{T + 16}">shaded: within ±10 %; dashed: equal</text>')
for name, rv, sv, ratio in points:
    if rv > 0 and sv > 0:
        colour = "#2a2" if abs(ratio - 1) <= 0.1 else "#c33"
        out.append(f'<circle cx="{sx(rv):.1f}" cy="{sy(sv):.1f}" r="4" fill="{colour}"><title>{name}: real {rv:.1f}, dn-sim {sv:.1f} (medians), ratio {ratio:.2f}</title></circle>')
out.append("</svg>")
open(svg, "w").write("\n".join(out) + "\n")
PY
echo "wrote $out/exp-twin.csv, .md, .svg and $profile" >&2
