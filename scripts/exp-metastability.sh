#!/usr/bin/env bash
# Metastability under retries (throttling.md §4, step 4): clients offer a steady LOAD × L in open
# loop to a dn-sim with an ingress limit L; for TRIGGER seconds the limit drops to DROP × L, then it
# is restored. Does aggregate goodput come back to the offered load once capacity is back, and how
# soon — with retries only, and with each client throttle?
#
#   scripts/exp-metastability.sh [--quick]     (--quick: 4 s phases, about 1.5 minutes)
#
# What to expect: during the trigger the limit serves DROP × L of the LOAD × L offered, and the
# rest piles up as a backlog — requests waiting for a retry, for a throttle, or for a free worker.
# After the restore the backlog drains at only (1 − LOAD) × L, so recovery takes about
# backlog / ((1 − LOAD) × L) at best; retries that come back in step can keep the limit saturated
# with rejections longer (the sustaining effect of metastable failures, Bronson et al., HotOS '21),
# and a throttle that cut its rate during the trigger has to ramp back up before it drains anything.
# dn-sim's buckets charge admitted requests only, so rejected attempts cost the limit nothing here;
# with a limit that also charged rejected bodies, retries would sustain the overload more.
#
# Every setting can be overridden from the environment (defaults: full mode / --quick):
#   LIMIT_MB=20              L, dn-sim --limit-ingress in MB/s (MB = 2^20 bytes)
#   LIMIT_BURST=25ms         dn-sim --limit-burst
#   LOAD=0.85                offered load as a share of L (open loop, --rate, all processes)
#   DROP=0.5                 the limit during the trigger, as a share of L
#   BEFORE=30 / 4, TRIGGER=30 / 4, AFTER=90 / 8    phase lengths in seconds
#   PROCS=4                  independent loadgen processes
#   THREADS=800 / 200        workers per process (a request in backoff holds its worker; enough
#                            that open-loop sends are not late)
#   CLIENTS=2                connections per process
#   PAYLOAD_KB=64            request payload (echo --payload-req)
#   RETRY=exp:min=1s,max=10s,delta=1s,retries=30 / exp:min=300ms,max=3s,delta=300ms,retries=30
#   PERIOD=6s / 1s           the analyzer's --analysis-period
#   AIMD_INCREASE=20         the aimd throttle's --aimd-increase (ops/s per s)
#   THROTTLES="none analyzer sre aimd"
#   NAME=exp-metastability; OUTDIR=results / target/exp-quick
#
# Output: a markdown table per throttle (goodput before, during and after the trigger; the backlog
# — data offered and not yet served, queued in the client, waiting for a throttle or a retry, or in
# flight — at the restore and at the end of the load; recovery time; the drain after the load;
# retries, late sends, failures), the per-second series as CSV ($OUTDIR/$NAME.csv: t_s, throttle,
# goodput_mb_s, backlog_mb, retries, rejections) and a chart of goodput ($OUTDIR/$NAME.svg).
# "Recovered" = from that second until the load ends, the backlog stays within 1 s of load.
# Exit 1 if a report is missing. No goal is checked: this is an exploration (no issue names one).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
. scripts/lib/exp.sh
exp_parse_args "$@"

LIMIT_MB="${LIMIT_MB:-20}"
LIMIT_BURST="${LIMIT_BURST:-25ms}"
LOAD="${LOAD:-0.85}"
DROP="${DROP:-0.5}"
PROCS="${PROCS:-4}"
CLIENTS="${CLIENTS:-2}"
PAYLOAD_KB="${PAYLOAD_KB:-64}"
AIMD_INCREASE="${AIMD_INCREASE:-20}"
NAME="${NAME:-exp-metastability}"
read -r -a THROTTLES <<<"${THROTTLES:-none analyzer sre aimd}"
if [ "$QUICK" = 1 ]; then
    BEFORE="${BEFORE:-4}" TRIGGER="${TRIGGER:-4}" AFTER="${AFTER:-8}"
    THREADS="${THREADS:-200}"
    RETRY="${RETRY:-exp:min=300ms,max=3s,delta=300ms,retries=30}"
    PERIOD="${PERIOD:-1s}"
    OUTDIR="${OUTDIR:-target/exp-quick}"
else
    BEFORE="${BEFORE:-30}" TRIGGER="${TRIGGER:-30}" AFTER="${AFTER:-90}"
    THREADS="${THREADS:-800}"
    RETRY="${RETRY:-exp:min=1s,max=10s,delta=1s,retries=30}"
    PERIOD="${PERIOD:-6s}"
    OUTDIR="${OUTDIR:-results}"
fi
export LIMIT_MB LIMIT_BURST LOAD DROP PROCS THREADS CLIENTS PAYLOAD_KB RETRY PERIOD AIMD_INCREASE BEFORE TRIGGER AFTER

exp_build
exp_prepare_output

DN=""
trap 'kill $DN 2>/dev/null || true; rm -f "$OUT/dn-sim.ready"' EXIT
start_dn_sim "$OUT/dn-sim.ready" "$BIN/dn-sim" --store discard \
    --limit-ingress "${LIMIT_MB}MB/s" --limit-burst "$LIMIT_BURST" 2>"$OUT/dn-sim.log"
DN=$dn_pid port=$ready_port admin=${ready_admin##*:}

# PUT /config {"limit_ingress": BYTES_PER_S} on dn-sim's HTTP port.
set_limit() {
    python3 - "$admin" "$1" <<'EOF'
import json, sys, urllib.request
port, mb = sys.argv[1], float(sys.argv[2])
body = json.dumps({"limit_ingress": mb * (1 << 20)}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{port}/config", data=body, method="PUT",
                             headers={"Content-Type": "application/json"})
urllib.request.urlopen(req, timeout=5).read()
EOF
}

total=$((BEFORE + TRIGGER + AFTER))
rate=$(python3 -c "print(round($LOAD * $LIMIT_MB * 1024 / $PAYLOAD_KB / $PROCS, 3))")
for th in "${THROTTLES[@]}"; do
    set_limit "$LIMIT_MB"
    sleep 1 # the bucket fills again and the previous run's connections are gone
    pids=()
    for p in $(seq "$PROCS"); do
        "$BIN/loadgen" echo --target "127.0.0.1:$port" --payload-req "$PAYLOAD_KB" \
            --rate "$rate" --duration "${total}s" -t "$THREADS" --clients "$CLIENTS" --fail-at-end \
            --retry-backoff "$RETRY" --client-throttle "$th" --throttle-scope process \
            --analysis-period "$PERIOD" --aimd-increase "$AIMD_INCREASE" \
            --format json --output "$OUT/$th-$p.json" >/dev/null 2>"$OUT/$th-$p.log" &
        pids+=($!)
    done
    sleep "$BEFORE"
    set_limit "$(python3 -c "print($DROP * $LIMIT_MB)")"
    sleep "$TRIGGER"
    set_limit "$LIMIT_MB"
    for pid in "${pids[@]}"; do wait "$pid" || true; done
done

python3 - "$OUT" "${THROTTLES[@]}" <<'EOF'
import json, os, sys, glob
out, throttles = sys.argv[1], sys.argv[2:]
env = os.environ
MB = 1 << 20
L, load, drop = float(env["LIMIT_MB"]), float(env["LOAD"]), float(env["DROP"])
before, trigger, after = int(env["BEFORE"]), int(env["TRIGGER"]), int(env["AFTER"])
procs = int(env["PROCS"])
offered = load * L
restore, total = before + trigger, before + trigger + after
rows, csv, problems = [], [], []

def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")

for th in throttles:
    files = sorted(glob.glob(f"{out}/{th}-*.json"))
    if len(files) != procs:
        problems.append(f"{th}: {len(files)} of {procs} reports")
        continue
    good, retries, rej = {}, {}, {}
    fails = late = 0
    for f in files:
        j = json.load(open(f))
        fails += j["totals"]["failures"]
        late += j["totals"]["late_sends"]
        for p in j["series"]:
            # 1 s intervals from each process's start; the processes start together.
            k = int(p["t_s"] + 1e-3)
            good[k] = good.get(k, 0) + p.get("goodput_bytes", 0) / MB
            retries[k] = retries.get(k, 0) + p.get("retries", 0)
            rej[k] = rej.get(k, 0) + p.get("rejections", 0)
    end = max(max(good) + 1 if good else 0, total)
    g = [good.get(k, 0) for k in range(end)]
    # Backlog: data offered (scheduled) so far and not yet served, in MB. It holds requests queued
    # in the client (late sends), waiting for a throttle or a retry, and in flight.
    backlog, served = [], 0.0
    for k in range(end):
        served += g[k]
        backlog.append(max(0.0, offered * min(k + 1, total) - served))
    for k in range(end):
        csv.append((k, th, g[k], backlog[k], retries.get(k, 0), rej.get(k, 0)))
    warm = min(5, before // 2)
    # Recovered: from that second until the load ends, the backlog stays within 1 s of load.
    recovered = None
    for s in range(restore, total):
        if all(b <= offered for b in backlog[s:total]):
            recovered = s - restore
            break
    last_success = max((k for k in range(end) if g[k] > 0), default=0) + 1
    rows.append(dict(th=th, pre=mean(g[warm:before]), during=mean(g[before:restore]),
                     after=mean(g[restore:total]), at_restore=backlog[restore - 1],
                     at_end=backlog[total - 1], recovered=recovered,
                     drain=max(0, last_success - total), fails=fails, late=late,
                     retries=sum(retries.values())))

with open(env["CSV"], "w") as f:
    f.write("t_s,throttle,goodput_mb_s,backlog_mb,retries,rejections\n")
    for k, th, g, b, r, x in csv:
        f.write(f"{k},{th},{g:.3f},{b:.3f},{r},{x}\n")

print(f"L = {L:g} MB/s ingress (burst {env['LIMIT_BURST']}); offered {load:g} L = {offered:.1f} MB/s in open loop by "
      f"{procs} loadgen processes x -t {env['THREADS']} ({env['PAYLOAD_KB']} KB echo writes, one throttle per process); "
      f"limit {drop:g} L from t = {before} s to {restore} s, then L until the load ends at {total} s; "
      f"retry {env['RETRY']}; analyzer period {env['PERIOD']}; aimd +{env['AIMD_INCREASE']} ops/s per s\n")
print("| throttle | goodput before (MB/s) | during the trigger (MB/s) | after it (MB/s) | backlog at restore (MB) | backlog when the load ends (MB) | recovered after restore (s) | drain after the load (s) | retries | late sends | failed requests |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    rec = f"{r['recovered']}" if r["recovered"] is not None else f"no (> {after})"
    print(f"| {r['th']} | {r['pre']:.2f} | {r['during']:.2f} | {r['after']:.2f} | {r['at_restore']:.0f} | {r['at_end']:.0f} | "
          f"{rec} | {r['drain']} | {r['retries']} | {r['late']} | {r['fails']} |")
print()
print("recovered = the backlog (data offered and not yet served) is back within 1 s of load and stays there until the load ends")
print("per-second series:", env["CSV"])
for p in problems:
    print("MISSING:", p)
if problems or not rows:
    sys.exit(1)
EOF

if [ -s "$CSV" ] && [ "$(wc -l <"$CSV")" -gt 1 ]; then
    "$BIN/loadgen" plot --csv "$CSV" --x t_s --y goodput_mb_s --series throttle \
        --title "Goodput, ${LOAD} L offered; limit ${DROP} L from ${BEFORE} s to $((BEFORE + TRIGGER)) s (L = ${LIMIT_MB} MB/s)" \
        --x-label "time (s)" --y-label "goodput (MB/s, MB = 2^20 bytes)" -o "${CSV%.csv}.svg" >/dev/null
    echo "chart: ${CSV%.csv}.svg"
fi
