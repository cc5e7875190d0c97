#!/usr/bin/env bash
# Sizing figures for the Helm chart's resource requests (deploy/helm/ozone-dn-lab/values.yaml):
# on 127.0.0.1, a dn-sim (release build) idle, then loaded by loadgen echo (open loop) at each
# rate of --rates for --duration each, then loaded by loadgen write (1 MB writes, --store
# discard so that the data is not kept). Measured from /proc: each process's CPU seconds
# (utime + stime) over its measured run and its peak resident set (VmHWM); loadgen's own CPU
# also from its JSON result. Both processes share this machine's cores, so a figure is what the
# process used here, not what it would need alone.
#
# Writes OUT/sizing.md (default results/) and prints it.
# Usage: scripts/measure-sizing.sh [--rates 5000,10000] [--duration 10s] [--out DIR]
# Environment: LOADGEN, DN_SIM: binaries to use (default: release builds, built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

rates=5000,10000 duration=10s out=results
while [ $# -gt 0 ]; do
    case "$1" in
        --rates) rates="${2:?--rates needs a list}"; shift 2 ;;
        --duration) duration="${2:?--duration needs a value}"; shift 2 ;;
        --out) out="${2:?--out needs a folder}"; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "measure-sizing.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
release_binaries
scratch_and_cleanup
mkdir -p "$out"

ticks=$(getconf CLK_TCK)
# cpu_s PID: CPU seconds (user + system) the process has used so far.
cpu_s() { awk -v t="$ticks" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
# kb FIELD PID: a /proc/PID/status field in kB (VmRSS, VmHWM).
kb() { awk -v f="$1:" '$1 == f {print $2}' "/proc/$2/status"; }

start_dn_sim "$work/dn.ready" "$DN_SIM" --store discard >"$work/dn.log" 2>&1 \
    || { cat "$work/dn.log" >&2; exit 1; }
pids+=("$dn_pid")
sleep 2
idle_rss=$(kb VmRSS "$dn_pid")

# run_loadgen NAME ARGS...: loadgen against the dn-sim, sampling its own VmHWM until it exits;
# sets lg_rss_kb, lg_cpu_s (from its JSON), lg_rate (achieved requests/s), dn_cpu_s (dn-sim's
# CPU over the same run) and dn_hwm_kb.
run_loadgen() {
    local name=$1 before pid peak=0 now
    shift
    before=$(cpu_s "$dn_pid")
    "$LOADGEN" "$@" --target "$ready_client" --format json --output "$work/$name.json" \
        >/dev/null 2>"$work/$name.err" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        now=$(kb VmHWM "$pid" 2>/dev/null || echo 0)
        [ -n "$now" ] && [ "$now" -gt "$peak" ] && peak=$now
        sleep 0.2
    done
    wait "$pid" || { cat "$work/$name.err" >&2; exit 1; }
    lg_rss_kb=$peak
    dn_cpu_s=$(awk -v a="$before" -v b="$(cpu_s "$dn_pid")" 'BEGIN {print b - a}')
    dn_hwm_kb=$(kb VmHWM "$dn_pid")
    read -r lg_cpu_s lg_rate lg_wall <<<"$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["generator"]["cpu_s"], r["throughput"]["requests_per_s"], r["generator"]["wall_s"])' "$work/$name.json")"
}

{
    echo "# Sizing figures (scripts/measure-sizing.sh)"
    echo
    echo "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); dn-sim and loadgen (release builds) on the same machine, loopback; $duration per run."
    echo "dn-sim idle: resident set **$((idle_rss / 1024)) MiB** (VmRSS after start)."
    echo
    echo "| workload | achieved /s | loadgen CPU cores | loadgen cores per 10k/s | loadgen peak RSS MiB | dn-sim CPU cores | dn-sim cores per 10k/s | dn-sim peak RSS MiB |"
    echo "|---|---|---|---|---|---|---|---|"
} >"$work/sizing.md"
secs=$(python3 -c "import sys; s=sys.argv[1]; print(float(s[:-1]) * {'s': 1, 'm': 60}[s[-1]])" "$duration")
IFS=, read -ra list <<<"$rates"
for rate in "${list[@]}"; do
    run_loadgen "echo-$rate" echo --rate "$rate" --duration "$duration" --threads 16
    python3 - "$work/sizing.md" "echo --rate $rate" "$lg_rate" "$lg_cpu_s" "$lg_wall" "$lg_rss_kb" "$dn_cpu_s" "$dn_hwm_kb" <<'EOF'
import sys
path, name, rate, lg_cpu, lg_wall, lg_rss, dn_cpu, dn_hwm = sys.argv[1:]
rate, lg_cpu, lg_wall, dn_cpu = float(rate), float(lg_cpu), float(lg_wall), float(dn_cpu)
lg_cores, dn_cores = lg_cpu / lg_wall, dn_cpu / lg_wall
per = lambda c: c / rate * 10000
open(path, "a").write(f"| {name} | {rate:.0f} | {lg_cores:.2f} | {per(lg_cores):.2f} | {int(lg_rss) / 1024:.1f} | {dn_cores:.2f} | {per(dn_cores):.2f} | {int(dn_hwm) / 1024:.1f} |\n")
EOF
done
run_loadgen write write --duration "$duration" --threads 4 --write-size 1MB
python3 - "$work/sizing.md" "$lg_rate" "$lg_cpu_s" "$lg_wall" "$lg_rss_kb" "$dn_cpu_s" "$dn_hwm_kb" "$work/write.json" <<'EOF'
import sys, json
path, rate, lg_cpu, lg_wall, lg_rss, dn_cpu, dn_hwm, result = sys.argv[1:]
mb = json.load(open(result))["write"]["mb_per_s"]
lg_wall = float(lg_wall)
open(path, "a").write(f"| write 1 MB, 4 threads ({mb:.0f} MB/s) | {float(rate):.0f} | {float(lg_cpu) / lg_wall:.2f} | – | {int(lg_rss) / 1024:.1f} | {float(dn_cpu) / lg_wall:.2f} | – | {int(dn_hwm) / 1024:.1f} |\n")
EOF
{
    echo
    echo "CPU cores = CPU seconds / the run's wall time (loadgen's warm-up-free run; dn-sim's CPU over the same span). Peak RSS = VmHWM."
    echo "dn-sim ran with --store discard: with the default memory store its RSS also grows by the data written, up to --capacity (1GB)."
} >>"$work/sizing.md"
cp "$work/sizing.md" "$out/sizing.md"
cat "$out/sizing.md"
