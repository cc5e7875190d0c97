#!/usr/bin/env bash
# HADOOP-14660 reproduced on dn-sim (issue #6, throttling.md §4): one dn-sim with an ingress limit
# L, several independent loadgen processes that together offer clearly more than L, each writing a
# fixed amount of data. Compares --client-throttle none (retries only), analyzer, sre and aimd:
# aggregate goodput per second (mean, sd and p10–p90 after the warm-up), time to finish the whole
# job, rejections and retries per MB, locally throttled attempts.
#
#   scripts/exp-throttling.sh [--quick]      (--quick: a smaller job, < 1 minute, no goal checks)
#
# "Writing a fixed amount of data", two ways (WORKLOAD):
#   echo   (default) each process sends -n `loadgen echo --payload-req KB` requests: dn-sim charges
#          each request's encoded size to its ingress bucket (the committed results use this);
#   write  each process is `loadgen write` of -n application writes of KB, one WriteChunk each
#          (CRC32 checksums, a PutBlock every 16 MB), to a dn-sim with the discard store; retries
#          and the throttle act on every WriteChunk and PutBlock, and aimd paces bytes.
#
# Every setting can be overridden from the environment (defaults: full mode / --quick):
#   LIMIT_MB=20          L, dn-sim --limit-ingress in MB/s (MB = 2^20 bytes, dn-sim's units)
#   LIMIT_BURST=25ms / 100ms   dn-sim --limit-burst: the bucket holds this much time at L
#   PROCS=4              independent loadgen processes (each with its own throttle(s))
#   THREADS=16 / 2       workers per process (-t), one request outstanding each
#   CLIENTS=2 / 2        gRPC connections per process (--clients)
#   SCOPE=process        --throttle-scope: one throttle per process (WASB's JVM-wide analyzer) or
#                        per connection
#   PAYLOAD_KB=128 / 64  request payload (--payload-req)
#   REQUESTS=1800 / 300  requests per process (-n); full: 4 x 1800 x 128 KB = 900 MB, 45 s at L
#   RETRY=exp:min=1s,max=10s,delta=1s,retries=30 / exp:min=300ms,max=3s,delta=300ms,retries=30
#                        --retry-backoff of every configuration (the throttle comes on top)
#   PERIOD=6s / 1s       the analyzer's --analysis-period
#   SRE_K=2, SRE_WINDOW=2m   the sre throttle's --sre-k and --sre-window
#   AIMD_INCREASE=40 (echo, ops/s per s) / 5 (write, MB/s per s), AIMD_DECREASE=0.7
#                        the aimd throttle's --aimd-increase and --aimd-decrease (loadgen's
#                        default for echo, 500 ops/s per s, is far above a process's fair share
#                        here, ~40 writes/s = 5 MB/s: it overshoots every ~100 ms)
#   WORKLOAD=echo        echo or write (above)
#   THROTTLES="none analyzer sre aimd"   the configurations compared (none first: the baseline)
#   REPEAT=1             runs per configuration, interleaved (none, analyzer, sre, aimd, none, …)
#   WARMUP_S=5 / 1       seconds skipped at the start of each run for the goodput statistics
#   NAME=exp-throttling  output name; OUTDIR=results / target/exp-quick
#
# Retry baseline: ABFS's legacy ExponentialRetryPolicy (min 3 s, max 30 s, delta 3 s, 30 retries)
# with its time constants scaled down 3x (1s/10s/1s) so that the job finishes in about a minute;
# the analyzer's period is 6 s (ABFS: 10 s, range 1–30 s): long enough that one rejection among a
# period's ~240 writes of a process is below the analyzer's 1 % "increase" threshold. See
# results/exp-throttling.md for how the defaults were chosen (the "search" section).
#
# Output: per-run rows and, with REPEAT > 1, mean ± sd per configuration as markdown on stdout;
# the per-second aggregate series in $OUTDIR/$NAME.csv (t_s, throttle, run, goodput_mb_s) and its
# chart (run 1) in $OUTDIR/$NAME.svg; per-process JSON reports in $OUTDIR/$NAME/. Exit 1 if the
# accounting does not add up (any mode) or, in full mode, a goal is missed (reported, not hidden).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/exp.sh
exp_parse_args "$@"

LIMIT_MB="${LIMIT_MB:-20}"
PROCS="${PROCS:-4}"
SRE_K="${SRE_K:-2}"
SRE_WINDOW="${SRE_WINDOW:-2m}"
WORKLOAD="${WORKLOAD:-echo}"
case "$WORKLOAD" in
echo) AIMD_INCREASE="${AIMD_INCREASE:-40}" ;;
write) AIMD_INCREASE="${AIMD_INCREASE:-5}" ;;
*)
    echo "exp-throttling.sh: WORKLOAD must be echo or write, not '$WORKLOAD'" >&2
    exit 2
    ;;
esac
AIMD_DECREASE="${AIMD_DECREASE:-0.7}"
REPEAT="${REPEAT:-1}"
NAME="${NAME:-exp-throttling}"
read -r -a THROTTLES <<<"${THROTTLES:-none analyzer sre aimd}"
if [ "$QUICK" = 1 ]; then
    THREADS="${THREADS:-2}"
    CLIENTS="${CLIENTS:-2}"
    SCOPE="${SCOPE:-connection}"
    PAYLOAD_KB="${PAYLOAD_KB:-64}"
    REQUESTS="${REQUESTS:-300}"     # per process: 4 x 300 x 64 KB = 75 MB, ~4 s at L
    WARMUP_S="${WARMUP_S:-1}"
    RETRY="${RETRY:-exp:min=300ms,max=3s,delta=300ms,retries=30}"
    LIMIT_BURST="${LIMIT_BURST:-100ms}"
    PERIOD="${PERIOD:-1s}"
    OUTDIR="${OUTDIR:-target/exp-quick}"
else
    THREADS="${THREADS:-16}"
    CLIENTS="${CLIENTS:-2}"
    SCOPE="${SCOPE:-process}"
    PAYLOAD_KB="${PAYLOAD_KB:-128}"
    REQUESTS="${REQUESTS:-1800}"    # per process: 4 x 1800 x 128 KB = 900 MB, 45 s at L
    WARMUP_S="${WARMUP_S:-5}"
    RETRY="${RETRY:-exp:min=1s,max=10s,delta=1s,retries=30}"
    LIMIT_BURST="${LIMIT_BURST:-25ms}"
    PERIOD="${PERIOD:-6s}"
    OUTDIR="${OUTDIR:-results}"
fi
export RETRY LIMIT_BURST PERIOD SCOPE THREADS CLIENTS PAYLOAD_KB SRE_K SRE_WINDOW AIMD_INCREASE AIMD_DECREASE WORKLOAD

exp_build
exp_prepare_output

store=memory
if [ "$WORKLOAD" = write ]; then store=discard; fi
# Port 0 and the address dn-sim writes to its ready file: no port is guessed.
. scripts/lib.sh
ready="$OUT/dn-sim.ready"
rm -f "$ready"
"$BIN/dn-sim" --listen 127.0.0.1:0 --metrics-listen none --store "$store" --ready-file "$ready" \
    --limit-ingress "${LIMIT_MB}MB/s" --limit-burst "$LIMIT_BURST" 2>"$OUT/dn-sim.log" &
DN=$!
trap 'kill $DN 2>/dev/null || true' EXIT
wait_ready_file "$ready" "$DN" || { cat "$OUT/dn-sim.log" >&2; exit 1; }
port=${ready_client##*:}

# Interleaved: run r of every configuration, then run r + 1, so slow drifts of the shared machine
# spread over all of them.
for rep in $(seq "$REPEAT"); do
    for th in "${THROTTLES[@]}"; do
        # A pause so that the bucket is full again and the previous run's connections are gone.
        sleep 1
        start=$(date +%s.%N)
        pids=()
        for p in $(seq "$PROCS"); do
            if [ "$WORKLOAD" = write ]; then
                what=(write --write-size "${PAYLOAD_KB}KB" --chunk-size "${PAYLOAD_KB}KB")
            else
                what=(echo --payload-req "$PAYLOAD_KB" --fail-at-end)
            fi
            "$BIN/loadgen" "${what[@]}" --target "127.0.0.1:$port" \
                -n "$REQUESTS" -t "$THREADS" --clients "$CLIENTS" \
                --retry-backoff "$RETRY" --client-throttle "$th" --throttle-scope "$SCOPE" \
                --analysis-period "$PERIOD" --sre-k "$SRE_K" --sre-window "$SRE_WINDOW" \
                --aimd-increase "$AIMD_INCREASE" --aimd-decrease "$AIMD_DECREASE" \
                --format json --output "$OUT/$th-r$rep-$p.json" >/dev/null 2>"$OUT/$th-r$rep-$p.log" &
            pids+=($!)
        done
        for pid in "${pids[@]}"; do wait "$pid" || true; done
        end=$(date +%s.%N)
        python3 -c "print($end - $start)" >"$OUT/$th-r$rep.wall"
    done
done

status=0
python3 - "$OUT" "$LIMIT_MB" "$WARMUP_S" "$QUICK" "$PROCS" "$REQUESTS" "$REPEAT" "${THROTTLES[@]}" <<'EOF' || status=$?
import json, math, os, re, sys, glob
out, L, warm, quick, procs, requests, repeat = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
throttles = sys.argv[8:]
env = os.environ
m = re.search(r"retries=(\d+)", env["RETRY"])
max_retries = int(m.group(1)) if m else 30
MB = 1 << 20
KB = int(env["PAYLOAD_KB"])
write = env["WORKLOAD"] == "write"
runs, series, problems = [], [], []

def mean_sd(xs):
    mu = sum(xs) / len(xs)
    return mu, math.sqrt(sum((x - mu) ** 2 for x in xs) / len(xs))

def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]

for rep in range(1, repeat + 1):
    for th in throttles:
        files = sorted(glob.glob(f"{out}/{th}-r{rep}-*.json"))
        if len(files) != procs:
            problems.append(f"{th} run {rep}: {len(files)} of {procs} reports")
            continue
        per_sec = {}
        tot = dict(ok=0, fail=0, retries=0, rej=0, thr=0, good=0, lrej=0)
        for f in files:
            j = json.load(open(f))
            r = j["resilience"]
            if r["max_retries_per_request"] > max_retries:
                problems.append(f"{f}: a request took {r['max_retries_per_request']} retries, over the bound")
            if write:
                # Every operation (WriteChunk, PutBlock) ends once: a success timed in "ops" or a
                # failure in "errors" (a failure ends the stream, and the process stops).
                ok_ops = sum(j["ops"].get(op, {}).get("count", 0) for op in ("WriteChunk", "PutBlock"))
                fails = j["totals"]["failures"]
                ops = ok_ops + fails
                if r["attempts"] + r["local_rejections"] != ops + r["retries"]:
                    problems.append(f"{f}: attempts {r['attempts']} + local rejections {r['local_rejections']} != operations {ops} + retries {r['retries']}")
                if fails == 0 and j["write"]["writes"] != requests:
                    problems.append(f"{f}: {j['write']['writes']} of {requests} writes and no failure")
                ok = j["write"]["writes"]
                # Bytes of successful WriteChunks in second k of the process, which started with
                # the others.
                points = list(enumerate(j["write"]["goodput_series_bytes"]))
            else:
                t = j["totals"]
                ok, fails, ops = t["successes"], t["failures"], requests
                n = t["successes"] + t["failures"] + r["locally_rejected"]
                if n != requests or t["requests"] != requests:
                    problems.append(f"{f}: successes {t['successes']} + failures {t['failures']} + locally rejected {r['locally_rejected']} != {requests}")
                if r["attempts"] + r["local_rejections"] != requests + r["retries"]:
                    problems.append(f"{f}: attempts do not add up")
                # Points are 1 s report intervals from each process's start (the last one shorter);
                # the processes start together, so interval k of every process is second k of the job.
                points = [(int(p["t_s"] + 1e-3), p.get("goodput_bytes", 0)) for p in j["series"]]
            if r["retries"] > max_retries * ops:
                problems.append(f"{f}: retries {r['retries']} over the bound")
            tot["ok"] += ok; tot["fail"] += fails; tot["lrej"] += r["locally_rejected"]
            tot["retries"] += r["retries"]; tot["rej"] += r["rejections"]; tot["thr"] += r["throttle_delays"] + r["local_rejections"]
            tot["good"] += r["goodput_bytes"]
            for k, b in points:
                per_sec[k] = per_sec.get(k, 0) + b
        job = float(open(f"{out}/{th}-r{rep}.wall").read())
        secs = sorted(per_sec)
        for k in secs:
            series.append((k, th, rep, per_sec[k] / MB))
        # After the warm-up, up to the last full second of the job.
        steady = [per_sec.get(k, 0) / MB for k in range(warm, int(job) - 1)]
        if not steady:
            steady = [per_sec[k] / MB for k in secs]
        mean, sd = mean_sd(steady)
        mb = tot["good"] / MB
        runs.append(dict(th=th, rep=rep, job=job, mean=mean, sd=sd, p10=pct(steady, 0.1), p90=pct(steady, 0.9),
                         frac=100 * mean / L, rej=tot["rej"] / max(mb, 1e-9), retries=tot["retries"] / max(mb, 1e-9),
                         thr=tot["thr"], fail=tot["fail"], lrej=tot["lrej"]))
with open(env["CSV"], "w") as f:
    f.write("t_s,throttle,run,goodput_mb_s\n")
    for k, th, rep, g in series:
        f.write(f"{k},{th},{rep},{g:.3f}\n")
print(f"L = {L:g} MB/s ingress, burst {env['LIMIT_BURST']}; {procs} loadgen processes x -t {env['THREADS']} "
      f"--clients {env['CLIENTS']} (throttle scope {env['SCOPE']}) x {requests} x {KB} KB "
      f"{'WriteChunks (loadgen write)' if write else 'echo writes'} "
      f"({procs * requests * KB / 1024:g} MB); retry {env['RETRY']}; analyzer period {env['PERIOD']}; "
      f"sre K {env['SRE_K']}, window {env['SRE_WINDOW']}; aimd +{env['AIMD_INCREASE']} {'MB/s' if write else 'ops/s'} per s, x{env['AIMD_DECREASE']}; warm-up {warm} s skipped; {repeat} run(s) each\n")
print("| throttle | run | job time (s) | aggregate goodput mean (MB/s) | sd (MB/s) | p10–p90 (MB/s) | goodput / L (%) | rejections per MB | retries per MB | locally throttled (attempts) | failed requests | locally rejected requests |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in runs:
    print(f"| {r['th']} | {r['rep']} | {r['job']:.1f} | {r['mean']:.2f} | {r['sd']:.2f} | {r['p10']:.1f}–{r['p90']:.1f} | {r['frac']:.0f} | "
          f"{r['rej']:.2f} | {r['retries']:.2f} | {r['thr']} | {r['fail']} | {r['lrej']} |")
print()
summary = {}
for th in throttles:
    rs = [r for r in runs if r["th"] == th]
    if rs:
        summary[th] = dict(n=len(rs), job=mean_sd([r["job"] for r in rs]), frac=mean_sd([r["frac"] for r in rs]),
                           sd=mean_sd([r["sd"] for r in rs]), rej=mean_sd([r["rej"] for r in rs]))
if repeat > 1:
    print("| throttle | runs | job time (s), mean ± sd | goodput / L (%), mean ± sd | per-second sd (MB/s), mean | rejections per MB, mean | job sooner than none (%) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for th, s in summary.items():
        sooner = f"{100 * (1 - s['job'][0] / summary['none']['job'][0]):.0f}" if "none" in summary and th != "none" else "—"
        print(f"| {th} | {s['n']} | {s['job'][0]:.1f} ± {s['job'][1]:.1f} | {s['frac'][0]:.0f} ± {s['frac'][1]:.0f} | "
              f"{s['sd'][0]:.2f} | {s['rej'][0]:.2f} | {sooner} |")
    print()
missed = []
if not quick and "none" in summary:
    base = summary["none"]["job"][0]
    for th, s in summary.items():
        if th == "none":
            continue
        frac = s["frac"][0]
        within = abs(frac - 100) <= 10
        sooner = 1 - s["job"][0] / base
        print(f"{th}: goodput {frac:.0f} % of L ({'within' if within else 'NOT within'} 10 %), "
              f"job {100 * sooner:.0f} % sooner than retries only ({'ok' if sooner >= 0.25 else 'goal of 25 % missed'})"
              + (f" [means of {s['n']} runs]" if s["n"] > 1 else ""))
        if not within or sooner < 0.25:
            missed.append(th)
for p in problems:
    print("ACCOUNTING:", p)
print("per-second series:", env["CSV"])
if problems or not runs:
    sys.exit(1)
if missed:
    print("goals missed by:", " ".join(missed))
    sys.exit(1)
EOF

# Aggregate goodput per second, one line per throttle (the thrash or the level-off), run 1.
if [ -s "$CSV" ] && [ "$(wc -l <"$CSV")" -gt 1 ]; then
    "$BIN/loadgen" plot --csv "$CSV" --x t_s --y goodput_mb_s --series throttle --where run=1 \
        --title "Aggregate goodput against a ${LIMIT_MB} MB/s ingress limit (HADOOP-14660 on dn-sim, run 1 of $REPEAT)" \
        --x-label "time (s)" --y-label "goodput (MB/s, MB = 2^20 bytes)" -o "${CSV%.csv}.svg" >/dev/null
    echo "chart: ${CSV%.csv}.svg"
fi
exit $status
