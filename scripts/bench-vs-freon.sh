#!/usr/bin/env bash
# loadgen beside the tool it replaces: the real `ozone freon dn-echo` (ozone-freon's Freon main
# class, in a JVM of its own, given the cluster's configuration so it finds the container through
# SCM as on a cluster) and `loadgen echo --target`, against the same real DataNode
# (scripts/real-datanode.sh), in alternating rounds of one run with the same settings.
#
# Per round and tool: calls/s (each tool's own `mean rate`), p50 and p99 (each tool's own report:
# freon's are Dropwizard's decaying-reservoir estimates, loadgen's from its HdrHistogram), the
# client's CPU time per call (user + system of the whole process tree, from /usr/bin/time) both
# in all and without the fixed start-up cost (a 1-call run of each tool, measured first, is
# subtracted), and failures. Then the medians over the rounds and the ratios loadgen ÷ freon.
# Goal: loadgen ≥ 1.0 × freon's calls/s at ≤ 0.5 × its CPU per call.
#
# freon prints its report (Dropwizard's ConsoleReporter) only when it has a console, so it runs
# under a pseudo-terminal (util-linux `script`).
#
# With --ratis both go through the DataNode's Ratis client port: `freon dn-echo --ratis`
# (XceiverClientRatis, HDDS-11224's own path) beside `loadgen echo --ratis --pipeline-id` on the
# pipeline of the container; as Raft writes, or with --read-only as Raft reads.
#
# Usage: scripts/bench-vs-freon.sh [-n N] [-t T] [--clients C] [--payload-req KB]
#            [--payload-resp KB] [--sleep-time-ms MS] [--rounds R] [--ozone-version V]
#            [--ratis [--read-only]] [--save-freon-report FILE] [--out FILE]
#   defaults: -n 100000 -t 32 --clients 32 (HDDS-11224's command), payloads 0, --rounds 3, 2.2.0
#   --save-freon-report FILE  keep the first round's raw freon console capture (the fixture of
#                             loadgen's report-layout test was made so)
#   --out FILE                also write the table (markdown) to FILE
# Environment: LOADGEN=path to a built loadgen (default: a release build).
# Exit: 0 done (whether or not the goal is met: the table says), 1 a call failed or the harness
# does not build, 2 bad flag, 3 only when Maven Central is out of reach (a probe: scripts/lib.sh
# harness_setup).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/lib.sh
. scripts/lib/real-datanode.sh

n=100000 threads=32 clients=32 preq=0 presp=0 sleep_ms=0 rounds=3 version=2.2.0
save_report="" out="" ratis="" read_only=""
while [ $# -gt 0 ]; do
    case "$1" in
        -n|--number-of-tests) n="${2:?$1 needs a value}"; shift 2 ;;
        -t|--threads) threads="${2:?$1 needs a value}"; shift 2 ;;
        --clients) clients="${2:?$1 needs a value}"; shift 2 ;;
        --payload-req) preq="${2:?$1 needs a value}"; shift 2 ;;
        --payload-resp) presp="${2:?$1 needs a value}"; shift 2 ;;
        --sleep-time-ms) sleep_ms="${2:?$1 needs a value}"; shift 2 ;;
        --rounds) rounds="${2:?$1 needs a value}"; shift 2 ;;
        --ozone-version) version="${2:?$1 needs a value}"; shift 2 ;;
        --save-freon-report) save_report="${2:?$1 needs a value}"; shift 2 ;;
        --out) out="${2:?$1 needs a value}"; shift 2 ;;
        --ratis) ratis=1; shift ;;
        --read-only) read_only=1; shift ;;
        -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-vs-freon.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -z "$read_only" ] || [ -n "$ratis" ] || { echo "bench-vs-freon.sh: --read-only needs --ratis (dn-echo over gRPC is always read-only)" >&2; exit 2; }
for v in "$n" "$threads" "$clients" "$preq" "$presp" "$sleep_ms" "$rounds"; do
    case "$v" in ''|*[!0-9]*) echo "bench-vs-freon.sh: '$v' is not a whole number" >&2; exit 2 ;; esac
done
[ -x /usr/bin/time ] || ensure_debian_packages time >&2
[ -x /usr/bin/time ] || { echo "bench-vs-freon.sh: /usr/bin/time is needed (Debian package time)" >&2; exit 2; }
command -v script >/dev/null || { echo "bench-vs-freon.sh: script is needed (Debian package util-linux)" >&2; exit 2; }

harness_setup bench-vs-freon.sh "$version" || exit $?
harness_setup bench-vs-freon.sh "$version" --freon || exit $?
loadgen="${LOADGEN:-}"
if [ -z "$loadgen" ]; then
    cargo build -q --release -p loadgen
    loadgen=target/release/loadgen
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/bench-vs-freon.XXXXXX")"
trap 'real_dn_stop; rm -rf "$work"' EXIT
real_dn_start "$work" "$version" --containers 1 || { echo "bench-vs-freon.sh: the real DataNode did not start" >&2; exit 1; }
echo "real DataNode $version at $dn_addr; $rounds round(s) of -n $n -t $threads --clients $clients --payload-req $preq --payload-resp $presp --sleep-time-ms $sleep_ms" >&2

common=(--clients "$clients" --payload-req "$preq" --payload-resp "$presp" --sleep-time-ms "$sleep_ms" --container-id 1)
# The transport: gRPC (freon forces read-only echoes there, loadgen's default) or Ratis.
freon_path=() loadgen_path=(--target "$dn_addr")
if [ -n "$ratis" ]; then
    [ -n "$dn_ratis" ] && [ -n "$dn_pipeline" ] || { echo "bench-vs-freon.sh: the harness named no Ratis port" >&2; exit 1; }
    freon_path=(--ratis)
    loadgen_path=(--target "$dn_ratis" --ratis --pipeline-id "$dn_pipeline" --read-only=false)
    if [ -n "$read_only" ]; then
        freon_path+=(--read-only)
        loadgen_path[-1]=--read-only=true
    fi
    echo "over Ratis: $dn_ratis, pipeline $dn_pipeline, $([ -n "$read_only" ] && echo "Raft reads" || echo "Raft writes")" >&2
fi

# run_tool TOOL N THREADS TAG: runs one tool, its report in $work/TAG.txt, CPU in $work/TAG.time
run_tool() {
    local tool="$1" count="$2" t="$3" tag="$4"
    if [ "$tool" = freon ]; then
        freon_cmd "$version" "$work/conf.xml" -- dn-echo -n "$count" -t "$t" "${common[@]}" ${freon_path[@]+"${freon_path[@]}"}
        printf '%q ' "${freon[@]}" >"$work/freon-cmd.sh"
        /usr/bin/time -f '%e %U %S' -o "$work/$tag.time" \
            script -qec "bash $work/freon-cmd.sh" /dev/null >"$work/$tag.txt" 2>&1 </dev/null
    else
        /usr/bin/time -f '%e %U %S' -o "$work/$tag.time" \
            "$loadgen" echo "${loadgen_path[@]}" -n "$count" -t "$t" "${common[@]}" \
            >"$work/$tag.txt" 2>"$work/$tag.err" </dev/null
    fi
}

echo "start-up cost: one call of each" >&2
run_tool freon 1 1 freon-startup
run_tool loadgen 1 1 loadgen-startup
for r in $(seq 1 "$rounds"); do
    # Alternate who goes first, so that neither always meets a warmer (or more tired) DataNode.
    if [ $((r % 2)) = 1 ]; then order="freon loadgen"; else order="loadgen freon"; fi
    for tool in $order; do
        echo "round $r: $tool" >&2
        run_tool "$tool" "$n" "$threads" "$tool-$r"
    done
done
[ -n "$save_report" ] && cp "$work/freon-1.txt" "$save_report"

PYTHONPATH="$root/scripts/lib" python3 - "$work" "$rounds" "$n" "$out" <<'PY'
import statistics, sys
import freon_report
work, rounds, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def report(tag):
    figures = freon_report.parse(f"{work}/{tag}.txt", f"bench-vs-freon.sh: {tag}")
    wall, user, system = map(float, open(f"{work}/{tag}.time").read().split()[-3:])
    return figures | {"cpu": user + system, "wall": wall}

startup = {t: report(f"{t}-startup")["cpu"] for t in ("freon", "loadgen")}
rows, per_tool = [], {"freon": [], "loadgen": []}
for r in range(1, rounds + 1):
    for tool in ("freon", "loadgen"):
        x = report(f"{tool}-{r}")
        x["cpu_us"] = x["cpu"] / n * 1e6
        x["cpu_us_steady"] = max(x["cpu"] - startup[tool], 0.0) / n * 1e6
        per_tool[tool].append(x)
        rows.append((r, tool, x))

lines = ["| round | tool | calls/s | p50 (ms) | p99 (ms) | CPU (µs/call) | CPU w/o start-up (µs/call) | failures |",
         "|---:|---|---:|---:|---:|---:|---:|---:|"]
for r, tool, x in rows:
    lines.append(f"| {r} | {tool} | {x['rate']:.0f} | {x['p50']:.2f} | {x['p99']:.2f} | {x['cpu_us']:.1f} | {x['cpu_us_steady']:.1f} | {x['failures']:.0f} |")
med = {t: {k: statistics.median(x[k] for x in xs) for k in ("rate", "p50", "p99", "cpu_us", "cpu_us_steady")} for t, xs in per_tool.items()}
for tool in ("freon", "loadgen"):
    m = med[tool]
    lines.append(f"| median | {tool} | {m['rate']:.0f} | {m['p50']:.2f} | {m['p99']:.2f} | {m['cpu_us']:.1f} | {m['cpu_us_steady']:.1f} | |")
f, l = med["freon"], med["loadgen"]
ratio = lambda a, b: a / b if b else float("inf")
lines.append(f"| loadgen ÷ freon | | {ratio(l['rate'], f['rate']):.2f}× | {ratio(l['p50'], f['p50']):.2f}× | {ratio(l['p99'], f['p99']):.2f}× | {ratio(l['cpu_us'], f['cpu_us']):.3f}× | {ratio(l['cpu_us_steady'], f['cpu_us_steady']):.3f}× | |")
lines.append("")
lines.append(f"start-up cost (one call): freon {startup['freon']:.2f} s CPU, loadgen {startup['loadgen']:.2f} s CPU")
met = l["rate"] >= f["rate"] and l["cpu_us_steady"] <= 0.5 * f["cpu_us_steady"] and l["cpu_us"] <= 0.5 * f["cpu_us"]
lines.append(f"goal (loadgen ≥ 1.0× freon's calls/s at ≤ 0.5× its CPU per call): {'met' if met else 'NOT met'}")
failures = sum(x["failures"] for xs in per_tool.values() for x in xs)
if failures:
    lines.append(f"failures: {failures:.0f} (a benchmark with failures measures something else)")
text = "\n".join(lines)
print(text)
if out:
    open(out, "w").write(text + "\n")
sys.exit(1 if failures else 0)
PY
