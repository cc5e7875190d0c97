#!/usr/bin/env bash
# Experiment "real starts": how much a real Ozone DataNode differs from itself between JVM starts,
# the same cells on the same machine. The bar any model of it (dn-sim --profile, exp-twin.sh)
# can be held to: a profile fitted on one start predicts another no better than the starts agree.
#
# A real DataNode (scripts/real-datanode.sh, one volume, the JVM's default heap) is started
# --starts times with hdds.datanode.read.chunk.threads.per.volume = --pool; each start gets the
# same JIT warm-up as exp-twin.sh's (real_dn_warm: 0 B echoes until three 3 s runs in a row agree
# within 5 %, then 3000 1 MiB echoes and runs of them until they agree), then its cells go round
# --rounds times: `loadgen echo` of 0 B at one request in flight and at 32 x 32, 0 B that sleep
# 1 ms at 32 x 32, 1 MiB and 10 MiB responses at 8 x 8, and `loadgen write` of 1 MB chunks at
# 4 x 4 (a container of its own each run).
# Writes OUT/exp-real-starts.csv (every run) and OUT/exp-real-starts.md: per cell each start's
# median calls/s (MB/s), p50 and p99 over its rounds, the spread between starts (the highest
# start's median / the lowest's) beside the spread within a start (its highest round / lowest,
# the median over starts), and whether the starts differ by more than exp-twin's goal for the
# cell (calls/s 10 %, MB/s 15 %, p50 15 %, p99 25 %): whether one prediction can lie within it of
# every start (a spread above (1 + goal) / (1 − goal), 1.22 for 10 %, says no). Takes about 4
# minutes a start.
#
# Usage: scripts/exp-real-starts.sh [--starts 4] [--pool 16] [--rounds 3] [--duration 4s]
#                                   [--warmup 1s] [--out DIR] [--quick]
#   --quick   2 starts, a JIT warm-up of 0.3 s runs and 50 1 MiB echoes, 1 round of 1 s cells,
#             into target/exp-real-starts-quick: checks the pipeline, measures nothing.
# Environment: LOADGEN: a built loadgen to use (default: the release build).
# Exit: 0 done, 2 bad flag, 3 no Maven Central for the harness, 1 a run failed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/lib.sh
. scripts/lib/real-datanode.sh

starts=4 pool=16 rounds=3 duration=4s warmup=1s out="" quick=0 version=2.2.0 warm_calls=3000 warm_run=3s
while [ $# -gt 0 ]; do
    case "$1" in
        --starts) starts="${2:?$1 needs a value}"; shift 2 ;;
        --pool) pool="${2:?$1 needs a value}"; shift 2 ;;
        --rounds) rounds="${2:?$1 needs a value}"; shift 2 ;;
        --duration) duration="${2:?$1 needs a value}"; shift 2 ;;
        --warmup) warmup="${2:?$1 needs a value}"; shift 2 ;;
        --out) out="${2:?$1 needs a value}"; shift 2 ;;
        --quick) quick=1; shift ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "exp-real-starts.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for flag in starts pool rounds; do
    [[ ${!flag} =~ ^[1-9][0-9]*$ ]] || { echo "exp-real-starts.sh: --$flag: '${!flag}' is not a count of 1 or more" >&2; exit 2; }
done
[ "$starts" -ge 2 ] || { echo "exp-real-starts.sh: --starts: '$starts': the spread between starts needs 2 or more" >&2; exit 2; }
if [ "$quick" = 1 ]; then
    starts=2 rounds=1 duration=1s warmup=300ms warm_calls=50 warm_run=300ms
    out="${out:-target/exp-real-starts-quick}"
fi
out="${out:-results}"
mkdir -p "$out"

harness_setup exp-real-starts.sh "$version" || exit $?
[ -n "${LOADGEN:-}" ] || cargo build -q --release -p loadgen
loadgen="${LOADGEN:-target/release/loadgen}"

work="$(mktemp -d "${TMPDIR:-/tmp}/exp-real-starts.XXXXXX")"
trap 'real_dn_stop; rm -rf "$work"' EXIT
csv="$work/runs.csv"
echo "start,round,cell,kind,bytes,clients,threads,sleep_ms,value,unit,p50_ms,p99_ms,failures" >"$csv"
per_volume=hdds.datanode.read.chunk.threads.per.volume
# Echoes address container 1; each write run a container of its own (the real DataNode asks SCM
# to close a container once it holds its size).
containers=$((1 + rounds))
warmups=""
cells() { # "kind bytes clients threads sleep" lines
    echo "echo 0 1 1 0"
    echo "echo 0 32 32 0"
    echo "echo 0 32 32 1"
    echo "echo $((1 << 20)) 8 8 0"
    echo "echo $((10 << 20)) 8 8 0"
    echo "write $((1 << 20)) 4 4 0"
}
for ((start = 1; start <= starts; start++)); do
    echo "real DataNode $version, $per_volume=$pool: start $start of $starts" >&2
    real_dn_start "$work" "$version" --containers "1-$containers" --heap default -D "$per_volume=$pool" ||
        { echo "exp-real-starts.sh: the real DataNode did not start" >&2; exit 1; }
    runs="$(real_dn_warm "$loadgen" "$work" "$warm_calls" "$warm_run")"
    echo "  JIT warm-up, calls/s: $runs" >&2
    warmups="$warmups${warmups:+; }start $start: $runs"
    container=2
    for ((round = 1; round <= rounds; round++)); do
        while read -r kind bytes clients threads sleep_ms; do
            args=(--target "$dn_addr" --clients "$clients" -t "$threads" --duration "$duration" --warmup "$warmup"
                -f --format json --output "$work/cell.json")
            if [ "$kind" = echo ]; then
                args=(echo "${args[@]}" --container-id 1 --payload-resp $((bytes / 1024)) --sleep-time-ms "$sleep_ms")
            else
                args=(write "${args[@]}" --container-id "$container" --write-size $((bytes / 1024))KB --chunk-size $((bytes / 1024))KB)
                container=$((container + 1))
            fi
            echo "  start $start round $round: loadgen ${args[0]} bytes=$bytes ${clients}x$threads sleep=$sleep_ms" >&2
            rm -f "$work/cell.json"
            "$loadgen" "${args[@]}" </dev/null >/dev/null 2>"$work/cell.err" || [ -s "$work/cell.json" ] ||
                { cat "$work/cell.err" >&2; exit 1; }
            PYTHONPATH="$root/scripts/lib" python3 - "$work/cell.json" "$start" "$round" "$kind" "$bytes" "$clients" "$threads" \
                "$sleep_ms" >>"$csv" <<'PY'
import sys
from loadgen_cell import figures, size
start, rnd, kind, nbytes, clients, threads, sleep_ms = sys.argv[2:9]
r, value, unit, p50, p99 = figures(sys.argv[1], kind)
if kind == "echo":
    name = f"echo sleep={sleep_ms}ms resp={size(nbytes)} {clients}x{threads}"
else:
    name = f"write chunk={size(nbytes)} {clients}x{threads}"
print(f"{start},{rnd},{name},{kind},{nbytes},{clients},{threads},{sleep_ms},{value:.2f},{unit},{p50:.3f},{p99:.3f},{r['totals']['failures']}")
PY
        done < <(cells)
    done
    real_dn_stop
done

cp "$csv" "$out/exp-real-starts.csv"
python3 - "$csv" "$out/exp-real-starts.md" "$version" "$pool" "$starts" "$rounds" "$duration" "$warmup" "$quick" "$warmups" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
md, version, pool, starts, rounds, duration, warmup, quick, warmups = sys.argv[2:11]
cells = {}  # cell -> start -> its rounds
for r in rows:
    cells.setdefault(r["cell"], {}).setdefault(int(r["start"]), []).append(r)
def spread(vals):
    vals = [v for v in vals if v > 0]
    return max(vals) / min(vals) if len(vals) > 1 else float("nan")
lines = [f"A real Ozone {version} DataNode started {starts} times on one machine "
         f"(hdds.datanode.read.chunk.threads.per.volume={pool}, the JVM's default heap), the same cells on each: "
         f"{rounds} round(s) of {duration} after {warmup}, the median of a start's rounds"
         f"{' (QUICK: a short warm-up, measures nothing)' if quick == '1' else ''}.",
         "between starts = the highest start's median ÷ the lowest's; within a start = a start's highest round ÷ "
         "its lowest, the median over starts. A model fitted on one start can predict another no closer "
         "than its starts agree: exp-twin's goals are calls/s ±10 % (MB/s ±15 %), p50 ±15 %, p99 ±25 %.",
         *([f"JIT warm-up of each start (calls/s): {warmups}."] if warmups else []), "",
         "| cell | unit | " + " | ".join(f"start {s}" for s in range(1, int(starts) + 1)) +
         " | between starts | within a start | p50 between | p99 between | starts differ by more than the goal |",
         "|---|---|" + "---:|" * int(starts) + "---:|---:|---:|---:|---|"]
beyond = 0
for name, by_start in cells.items():
    unit = next(iter(by_start.values()))[0]["unit"]
    med = lambda runs, key: statistics.median(float(r[key]) for r in runs)
    values = {s: med(runs, "value") for s, runs in sorted(by_start.items())}
    between = spread(values.values())
    within = [spread([float(r["value"]) for r in runs]) for runs in by_start.values()]
    within = [w for w in within if w == w]
    within_text = f"{statistics.median(within):.2f}" if within else "–"
    p50 = spread([med(runs, "p50_ms") for runs in by_start.values()])
    p99 = spread([med(runs, "p99_ms") for runs in by_start.values()])
    tol = 0.15 if unit == "MB/s" else 0.10
    # No one prediction p lies within ±t of both the lowest start a and the highest b (real ÷ p
    # in [1 − t, 1 + t] for both) once b / a > (1 + t) / (1 − t): 1.22 for 10 %.
    over = [what for what, s, t in ((unit, between, tol), ("p50", p50, 0.15), ("p99", p99, 0.25))
            if s == s and s > (1 + t) / (1 - t)]
    beyond += bool(over)
    verdict = ("yes: " + ", ".join(over) + " (no one prediction meets both extremes)") if over else "no"
    lines.append(f"| {name} | {unit} | " + " | ".join(f"{v:.1f}" for v in values.values()) +
                 f" | {between:.2f} | {within_text} | {p50:.2f} | {p99:.2f} | {verdict} |")
failures = sum(int(r["failures"]) for r in rows)
lines += ["", f"cells whose starts differ by more than one prediction can meet within the goals: {beyond} of {len(cells)}; failures in all runs: {failures}"]
text = "\n".join(lines)
print(text)
open(md, "w").write(text + "\n")
if failures:
    sys.exit("exp-real-starts.sh: some runs had failed requests (see the CSV)")
PY
echo "wrote $out/exp-real-starts.csv and .md" >&2
