#!/usr/bin/env bash
# The Helm chart's Indexed Job run on one machine: a dn-sim on 127.0.0.1 (port 0, its address
# from --ready-file), then N loadgen processes with JOB_COMPLETION_INDEX=0..N-1 and the chart's
# own arguments (deploy/helm/ozone-dn-lab/files/loadgen-args, plus what the Job adds: --shards N,
# one --start-at for all, --format json --output DIR/shard-I.json --result-markers), merged with
# `loadgen merge` as the chart's merge Job does (--wait on the directory); then ONE process
# doing the same total work (the same arguments without --shards) against the same dn-sim. It
# compares:
#
#   exactly      requests (merged = sum of the shards = -n = the single process's), failures
#                (merged = sum of the shards', and 0 like the single process's), the rate plan
#                and its peak rate (the whole test's, not N times it), a complete split whose
#                measured phases all overlap, and the merged latency histograms bucket for bucket
#                against the sum of the shards' histograms (what "exact merge" means: the merged
#                percentiles are those of all the shards' samples together, to the histogram's
#                3 significant digits, 0.1 %);
#   loosely      the merged percentiles against the single process's: two different runs on a
#                shared machine never give equal latencies, so they are shown side by side and
#                only p50 is held to a sanity bound (within a factor of 10: it catches a unit
#                or merge error, not noise; this machine is shared), and the achieved
#                rates are shown.
#
# Usage: scripts/shards-local.sh [N] [--out FILE]   (N default 4; --out: the comparison as
#        markdown, default target/shards-local.md)
# Environment: LOADGEN, DN_SIM: binaries to use (default: release builds, built if missing).
# Exit: 0 all exact comparisons hold, 1 one does not (or a run failed), 2 bad arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

shards=4 out=target/shards-local.md
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="${2:?--out needs a file}"; shift 2 ;;
        -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *[!0-9]*|'') echo "shards-local.sh: N must be a whole number ≥ 1, not '$1'" >&2; exit 2 ;;
        *) shards=$1; shift ;;
    esac
done
[ "$shards" -ge 1 ] || { echo "shards-local.sh: N must be ≥ 1" >&2; exit 2; }
release_binaries
scratch_and_cleanup

mapfile -t chart_args <deploy/helm/ozone-dn-lab/files/loadgen-args

start_dn_sim "$work/dn-sim.ready" "$DN_SIM" >"$work/dn-sim.log" 2>&1 \
    || { cat "$work/dn-sim.log" >&2; exit 1; }
pids+=("$dn_pid")
target=$ready_client
echo "dn-sim on $target; chart arguments: ${chart_args[*]}"

# The shards, as the Indexed Job's pods: all at once, one instant to start measuring at (long
# enough for every process to start and connect).
mkdir -p "$work/shards"
start_at=$(date -u -d '+4 seconds' +%Y-%m-%dT%H:%M:%S.%3NZ)
shard_pids=()
for ((i = 0; i < shards; i++)); do
    JOB_COMPLETION_INDEX=$i "$LOADGEN" "${chart_args[@]}" --target "$target" --shards "$shards" \
        --start-at "$start_at" --format json --output "$work/shards/shard-$i.json" \
        --result-markers >"$work/shard-$i.log" 2>"$work/shard-$i.err" &
    shard_pids+=($!)
done
failed=0
for ((i = 0; i < shards; i++)); do
    wait "${shard_pids[$i]}" || { echo "shard $i failed:" >&2; cat "$work/shard-$i.err" >&2; failed=1; }
done
[ "$failed" = 0 ] || exit 1

# The merge Job's command, and the kubectl-logs recipe's (the shards' stdout as one log).
"$LOADGEN" merge "$work/shards" --wait 10s --format json --output "$work/merged.json" >"$work/merged.txt"
for ((i = 0; i < shards; i++)); do sed "s|^|[pod/lab-loadgen-$i-x/loadgen] |" "$work/shard-$i.log"; done \
    >"$work/pods.log"
"$LOADGEN" merge "$work/pods.log" --format json --output "$work/merged-from-logs.json" >/dev/null
sed -n '1,/^$/p' "$work/merged.txt"

# One process, the same total work.
"$LOADGEN" "${chart_args[@]}" --target "$target" --format json --output "$work/single.json" \
    >"$work/single.txt" 2>"$work/single.err" || { cat "$work/single.err" >&2; exit 1; }

mkdir -p "$(dirname "$out")"
python3 - "$work" "$shards" "$out" <<'EOF'
import json, sys, glob, os
work, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
load = lambda p: json.load(open(p))
shards = [load(f"{work}/shards/shard-{i}.json") for i in range(n)]
merged, logs, single = load(f"{work}/merged.json"), load(f"{work}/merged-from-logs.json"), load(f"{work}/single.json")
problems, lines = [], []
def exact(what, got, want):
    ok = got == want
    lines.append(f"| {what} | {got} | {want} | {'exact' if ok else 'DIFFERS'} |")
    if not ok:
        problems.append(f"{what}: {got} != {want}")

lines += ["| exact comparison | merged shards | expected | |", "|---|---|---|---|"]
total = sum(s["totals"]["requests"] for s in shards)
exact("requests: merged = sum of shards", merged["totals"]["requests"], total)
exact("requests: merged = single process", merged["totals"]["requests"], single["totals"]["requests"])
exact("requests: merged = -n", merged["totals"]["requests"], merged["config"]["requests"])
exact("shares differ by at most one", max(s["totals"]["requests"] for s in shards) - min(s["totals"]["requests"] for s in shards) <= 1, True)
exact("failures: merged = sum of shards", merged["totals"]["failures"], sum(s["totals"]["failures"] for s in shards))
exact("failures: merged = single process (0)", (merged["totals"]["failures"], single["totals"]["failures"]), (0, 0))
exact("rate plan", merged["config"]["rate_plan"], single["config"]["rate_plan"])
exact("peak rate, /s", merged["config"]["peak_rate"], single["config"]["peak_rate"])
mp = merged["measured_phases"]
exact("complete split", mp["complete_split"], True)
exact("measured phases all overlap", mp["all_overlap"], True)
for kind in ("corrected", "uncorrected"):
    summed = {}
    for s in shards:
        for v, c in s["latency"][kind]["histogram"]["buckets"]:
            summed[v] = summed.get(v, 0) + c
    got = {v: c for v, c in merged["latency"][kind]["histogram"]["buckets"]}
    exact(f"{kind} histogram = sum of the shards' ({len(summed)} buckets)", got == summed, True)
exact("merge of the pods' logs = merge of the files", logs["latency"]["corrected"]["histogram"] == merged["latency"]["corrected"]["histogram"] and logs["totals"] == merged["totals"], True)

def pct(r, p):
    return next(x["ms"] for x in r["latency"]["corrected"]["percentiles"] if x["percentile"] == p)
lines += ["", "| latency (from intended send), ms | merged shards | single process | ratio |", "|---|---|---|---|"]
for p in (50.0, 90.0, 99.0, 99.9):
    a, b = pct(merged, p), pct(single, p)
    lines.append(f"| p{p:g} | {a:.3f} | {b:.3f} | {a / b if b else float('nan'):.2f} |")
ratio = pct(merged, 50.0) / max(pct(single, 50.0), 1e-9)
if not (1 / 10 <= ratio <= 10):
    problems.append(f"p50 of the merged shards is {ratio:.2f} × the single process's (sanity bound: 1/10 to 10: a unit or merge error, not noise)")
lines += ["", "| achieved | merged shards | single process |", "|---|---|---|",
          f"| requests/s | {merged['throughput']['requests_per_s']:.1f} | {single['throughput']['requests_per_s']:.1f} |",
          f"| measured for, s | {merged['elapsed_s']:.3f} | {single['elapsed_s']:.3f} |",
          "", "| shard | requests | start offset from --start-at, ms |", "|---|---|---|"]
for r in merged["runs"]:
    lines.append(f"| {r['shard']['index']}/{r['shard']['count']} | {r['requests']} | {r['start_offset_ms']:+.3f} |")
lines.append(f"\nmeasured phases overlap for {mp['overlap_s']:.3f} s of the longest {mp['longest_s']:.3f} s; starts spread over {mp['start_spread_ms']:.3f} ms")
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
if problems:
    print("shards-local: NOT equal:\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"shards-local: {n} shards merged to the single process's count, failures and rate exactly; histograms merged bucket for bucket")
EOF
