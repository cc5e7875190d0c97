#!/usr/bin/env bash
# HADOOP-14660 reproduced on dn-sim (issue #6, throttling.md §4): one dn-sim with an ingress limit
# L, several independent loadgen processes that together offer clearly more than L, each writing a
# fixed amount of data. Compares --client-throttle none (retries only), analyzer, sre and aimd:
# aggregate goodput per second (mean and sd after the warm-up), time to finish the whole job,
# rejections and retries per MB, locally throttled attempts.
#
#   scripts/exp-throttling.sh [--quick]      (--quick: a smaller job, < 1 minute, no goal checks)
#
# "Writing a fixed amount of data": `loadgen write` has no retries or throttles yet, so each process
# sends `loadgen echo --payload-req 64` requests, -n of them: dn-sim charges each request's encoded
# size to its ingress bucket, so this is a fixed amount of ingress data per process.
#
# Retry baseline: ABFS's legacy ExponentialRetryPolicy (min 3 s, max 30 s, delta 3 s, 30 retries)
# with its time constants scaled down 10x (300ms/3s/300ms, 30 retries) so that the job finishes in
# tens of seconds; the analyzer's analysis period is scaled the same way (10 s -> 1 s, ABFS's
# smallest allowed value). Every configuration uses the same retry policy; the throttle comes on
# top, before every attempt.
#
# Output: a markdown table on stdout; the per-second aggregate series in
# results/exp-throttling.csv (t_s, throttle, goodput_mb_s); per-process JSON reports in
# results/exp-throttling/. Exit 1 if the accounting does not add up (any mode) or, in full mode,
# a goal is missed (reported, not hidden).
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=0
for a in "$@"; do
    case "$a" in
    --quick) QUICK=1 ;;
    *)
        echo "exp-throttling.sh: unknown argument '$a' (use --quick)" >&2
        exit 2
        ;;
    esac
done

LIMIT_MB=20          # L, MB/s (MB = 2^20 bytes, as dn-sim's units)
PROCS=4              # independent loadgen processes
THREADS=2            # workers per process
CLIENTS=2            # connections per process (one throttle each)
PAYLOAD_KB=64
if [ "$QUICK" = 1 ]; then
    REQUESTS=300     # per process: 4 x 300 x 64 KB = 75 MB, ~4 s at L
    WARMUP_S=1
else
    REQUESTS=2400    # per process: 4 x 2400 x 64 KB = 600 MB, 30 s at L
    WARMUP_S=5
fi
export RETRY; RETRY="${RETRY:-exp:min=300ms,max=3s,delta=300ms,retries=30}"   # override: RETRY=abfs-new …
THROTTLES=(none analyzer sre aimd)

# Always build what is run (a no-op when up to date), so a stale binary never answers: the full
# run measures the release build, --quick the debug build the tests use.
if [ -z "${BIN:-}" ]; then
    if [ "$QUICK" = 1 ]; then
        cargo build -q -p dn-sim -p loadgen
        BIN=target/debug
    else
        cargo build -q --release -p dn-sim -p loadgen
        BIN=target/release
    fi
fi

# --quick writes under target/, so the committed full-run results are never overwritten.
if [ "$QUICK" = 1 ]; then
    OUT=target/exp-quick/exp-throttling
    CSV=target/exp-quick/exp-throttling.csv
else
    OUT=results/exp-throttling
    CSV=results/exp-throttling.csv
fi
export CSV
mkdir -p "$OUT"
rm -f "$OUT"/*.json

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN/dn-sim" --listen "127.0.0.1:$port" --metrics-listen none \
    --limit-ingress "${LIMIT_MB}MB/s" 2>"$OUT/dn-sim.log" &
DN=$!
trap 'kill $DN 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    sleep 0.1
done

for th in "${THROTTLES[@]}"; do
    # A pause so that the bucket is full again and the previous run's connections are gone.
    sleep 1
    start=$(date +%s.%N)
    pids=()
    for p in $(seq "$PROCS"); do
        "$BIN/loadgen" echo --target "127.0.0.1:$port" --payload-req "$PAYLOAD_KB" \
            -n "$REQUESTS" -t "$THREADS" --clients "$CLIENTS" --fail-at-end \
            --retry-backoff "$RETRY" --client-throttle "$th" --analysis-period 1s \
            --format json --output "$OUT/$th-$p.json" >/dev/null 2>"$OUT/$th-$p.log" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || true; done
    end=$(date +%s.%N)
    python3 -c "print($end - $start)" >"$OUT/$th.wall"
done

status=0
python3 - "$OUT" "$LIMIT_MB" "$WARMUP_S" "$QUICK" "$PROCS" "$REQUESTS" "${THROTTLES[@]}" <<'EOF' || status=$?
import json, math, os, sys, glob
out, L, warm, quick, procs, requests = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5]), int(sys.argv[6])
throttles = sys.argv[7:]
MB = 1 << 20
rows, series, problems, jobs = [], [], [], {}
for th in throttles:
    files = sorted(glob.glob(f"{out}/{th}-*.json"))
    if len(files) != procs:
        problems.append(f"{th}: {len(files)} of {procs} reports")
        continue
    per_sec = {}
    tot = dict(ok=0, fail=0, local=0, retries=0, rej=0, thr=0, good=0, attempts=0, lrej=0)
    for f in files:
        j = json.load(open(f))
        r, t = j["resilience"], j["totals"]
        n = t["successes"] + t["failures"] + r["locally_rejected"]
        if n != requests or t["requests"] != requests:
            problems.append(f"{f}: successes {t['successes']} + failures {t['failures']} + locally rejected {r['locally_rejected']} != {requests}")
        if r["retries"] > 30 * requests or r["max_retries_per_request"] > 30:
            problems.append(f"{f}: retries {r['retries']} (max {r['max_retries_per_request']}) over the bound")
        if r["attempts"] + r["local_rejections"] != requests + r["retries"]:
            problems.append(f"{f}: attempts do not add up")
        tot["ok"] += t["successes"]; tot["fail"] += t["failures"]; tot["lrej"] += r["locally_rejected"]
        tot["retries"] += r["retries"]; tot["rej"] += r["rejections"]; tot["thr"] += r["locally_throttled"]
        tot["good"] += r["goodput_bytes"]; tot["attempts"] += r["attempts"]
        for p in j["series"]:
            # Points are 1 s report intervals from each process's start (the last one shorter);
            # the processes start together, so interval k of every process is second k of the job.
            k = int(p["t_s"] + 1e-3)
            per_sec[k] = per_sec.get(k, 0) + p.get("goodput_bytes", 0)
    job = float(open(f"{out}/{th}.wall").read())
    jobs[th] = job
    secs = sorted(per_sec)
    for k in secs:
        series.append((k, th, per_sec[k] / MB))
    # After the warm-up, up to the last full second of the job.
    steady = [per_sec.get(k, 0) / MB for k in range(warm, int(job) - 1)]
    if not steady:
        steady = [per_sec[k] / MB for k in secs]
    mean = sum(steady) / len(steady)
    sd = math.sqrt(sum((x - mean) ** 2 for x in steady) / len(steady))
    mb = tot["good"] / MB
    rows.append((th, job, mean, sd, 100 * mean / L, tot["rej"] / max(mb, 1e-9), tot["retries"] / max(mb, 1e-9), tot["thr"], tot["fail"], tot["lrej"]))
with open(os.environ["CSV"], "w") as f:
    f.write("t_s,throttle,goodput_mb_s\n")
    for k, th, g in series:
        f.write(f"{k},{th},{g:.3f}\n")
print(f"L = {L:g} MB/s ingress; {procs} loadgen processes x {requests} x 64 KB echo writes "
      f"({procs * requests * 64 / 1024:g} MB); retry {os.environ.get('RETRY', 'exp:min=300ms,max=3s,delta=300ms,retries=30')}; warm-up {warm} s skipped\n")
print("| throttle | job time (s) | aggregate goodput mean (MB/s) | sd (MB/s) | goodput / L (%) | rejections per MB | retries per MB | locally throttled (attempts) | failed requests | locally rejected requests |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r[0]} | {r[1]:.1f} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.0f} | {r[5]:.2f} | {r[6]:.2f} | {r[7]} | {r[8]} | {r[9]} |")
print()
missed = []
if not quick and "none" in jobs:
    for r in rows:
        if r[0] == "none":
            continue
        within = abs(r[2] - L) <= 0.1 * L
        sooner = 1 - r[1] / jobs["none"]
        print(f"{r[0]}: goodput {r[4]:.0f} % of L ({'within' if within else 'NOT within'} 10 %), "
              f"job {100 * sooner:.0f} % sooner than retries only ({'ok' if sooner >= 0.25 else 'goal of 25 % missed'})")
        if not within or sooner < 0.25:
            missed.append(r[0])
for p in problems:
    print("ACCOUNTING:", p)
print("per-second series:", os.environ["CSV"])
if problems or not rows:
    sys.exit(1)
if missed:
    print("goals missed by:", " ".join(missed))
    sys.exit(1)
EOF

# Aggregate goodput per second, one line per throttle (the thrash or the level-off).
if [ -s "$CSV" ] && [ "$(wc -l <"$CSV")" -gt 1 ]; then
    "$BIN/loadgen" plot --csv "$CSV" --x t_s --y goodput_mb_s --series throttle \
        --title "Aggregate goodput against a ${LIMIT_MB} MB/s ingress limit (HADOOP-14660 on dn-sim)" \
        --x-label "time (s)" --y-label "goodput (MB/s, MB = 2^20 bytes)" -o "${CSV%.csv}.svg" >/dev/null
    echo "chart: ${CSV%.csv}.svg"
fi
exit $status

