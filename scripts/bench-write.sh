#!/usr/bin/env bash
# The wire's speed: how close do `loadgen write` and `loadgen read` of 4 MB chunks get
# to what one TCP stream moves over loopback? In one run, alternating in every round:
#   - iperf3, one stream over 127.0.0.1 (the ceiling);
#   - `loadgen write` of 4 MB WriteChunks (--write-size 4MB, CRC32 over 16 KB windows) to a dn-sim
#     with --store discard: 1 writer on 1 connection, 4 writers on 1 connection, 4 writers on 4;
#   - `loadgen read --manifest` of a data set written once at the start to a second dn-sim with
#     --store memory, with the same 1x1, 4x1 and 4x4 workers x connections.
# Each cell prints MB/s (MB = 2^20 bytes, loadgen's unit), the client's and the server's CPU
# milliseconds per MB (user + system; client from its rusage, server from /proc/PID/stat before
# and after), and each as a ratio of iperf3's figure in the same round (iperf3's own client and
# server CPU). The summary is the median over rounds; ratios are medians of per-round ratios.
# Goals: writes and reads >= 0.5x iperf3's throughput; 4 writers no slower than 1.
#
# Usage: scripts/bench-write.sh [--rounds N] [--duration D] [--read-size MB] [--out FILE]
#   --rounds N       rounds, each running every cell once (default 3; the machine is noisy)
#   --duration D     seconds per iperf3 and write cell: 8 or 8s (default 8s)
#   --read-size MB   size of the data set every read cell reads back (default 2048 MB)
#   --out FILE       also write the tables (markdown) to FILE and the raw cells to FILE.rows
#                    (round, cell, MB/s, client CPU s, server CPU s, MB)
# Environment: LOADGEN, DN_SIM (default: release builds, built here with CARGO_BUILD_JOBS, default
# 1), LOADGEN_ARGS (extra flags for every loadgen write and read, e.g. "--runtime-threads 2").
# Installs iperf3 (Debian) when missing. Starts its own dn-sim and iperf3 servers on free
# 127.0.0.1 ports and stops only those. Exit: 0 done, 2 bad flag, 1 a run failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

rounds=3
duration=8
read_mb=2048
out=""
usage_error() {
    echo "bench-write.sh: $1 (see --help)" >&2
    exit 2
}
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds | --duration | --read-size | --out)
            [[ $# -ge 2 ]] || usage_error "$1 needs a value"
            case "$1" in
                --rounds) rounds=$2 ;;
                --duration) duration=${2%s} ;;
                --read-size) read_mb=${2%MB} ;;
                --out) out=$2 ;;
            esac
            shift 2
            ;;
        -h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) usage_error "unknown argument '$1'" ;;
    esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || usage_error "--rounds must be a positive integer, not '$rounds'"
[[ "$duration" =~ ^[1-9][0-9]*$ ]] || usage_error "--duration must be whole seconds (8 or 8s), not '$duration'"
[[ "$read_mb" =~ ^[1-9][0-9]*$ ]] || usage_error "--read-size must be a positive number of MB, not '$read_mb'"
# The read data set is written by 4 workers in 4 MB writes: a multiple of 16 MB.
writes=$(((read_mb + 15) / 16 * 4))
read_mb=$((writes * 4))

command -v iperf3 >/dev/null 2>&1 || ensure_debian_packages iperf3
command -v python3 >/dev/null 2>&1 || ensure_debian_packages python3
release_binaries
read -r -a extra <<<"${LOADGEN_ARGS:-}"

scratch_and_cleanup

# Servers: iperf3, a dn-sim that discards, a dn-sim that keeps the read data set in memory.
# iperf3 cannot bind port 0 and report it: the one port here that is picked, not told.
iperf_port=$(free_port)
iperf3 -s -B 127.0.0.1 -p "$iperf_port" >/dev/null 2>&1 &
iperf_pid=$!
pids+=("$iperf_pid")
start_dn_sim "$work/discard.ready" "$DN_SIM" --metrics-listen none --store discard 2>"$work/discard.log"
discard_pid=$dn_pid discard_port=$ready_port
pids+=("$discard_pid")
start_dn_sim "$work/memory.ready" "$DN_SIM" --metrics-listen none --store memory \
    --capacity "$((read_mb + 256))MB" 2>"$work/memory.log"
memory_pid=$dn_pid memory_port=$ready_port
pids+=("$memory_pid")
wait_port "$iperf_port"

tick=$(getconf CLK_TCK)
# CPU seconds (user + system) of a running process so far.
proc_cpu() { awk -v t="$tick" '{printf "%.3f", ($14 + $15) / t}' "/proc/$1/stat"; }

# Runs a command with stdout in $work/out and stderr in $work/err; prints its CPU seconds
# (user + system, from its rusage) or fails with its exit code.
cpu_of() {
    python3 - "$work/out" "$work/err" "$@" <<'PY'
import resource, subprocess, sys
with open(sys.argv[1], "w") as out, open(sys.argv[2], "w") as err:
    rc = subprocess.run(sys.argv[3:], stdout=out, stderr=err).returncode
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{r.ru_utime + r.ru_stime:.3f}")
sys.exit(rc)
PY
}

# One cell: runs "$@" while measuring server PID $1's CPU; appends "round cell MB/s client-cpu-s
# server-cpu-s MB" to $work/rows. $2: the cell's name, $3: how to read MB and seconds from the
# output (iperf3 | write | read).
cell() {
    local server=$1 name=$2 kind=$3 s0 s1 c
    shift 3
    s0=$(proc_cpu "$server")
    if ! c=$(cpu_of "$@"); then
        echo "bench-write.sh: $name failed: $*" >&2
        cat "$work/err" "$work/out" >&2
        return 1
    fi
    s1=$(proc_cpu "$server")
    python3 - "$work/out" "$kind" "$round" "$name" "$c" "$s0" "$s1" >>"$work/rows" <<'PY'
import json, sys
path, kind, rnd, name, client, s0, s1 = sys.argv[1:]
r = json.load(open(path))
if kind == "iperf3":
    end = r["end"]["sum_received"]
    mb, secs = end["bytes"] / 2**20, end["seconds"]
else:
    assert not r["errors"] and not r["integrity_errors"], (r["errors"], r["integrity_errors"])
    part = r[kind]
    mb = (part["bytes"] if kind == "write" else part["bytes_read"]) / 2**20
    secs = part["elapsed_s"]
print(rnd, name, f"{mb / secs:.1f}", client, f"{float(s1) - float(s0):.3f}", f"{mb:.1f}")
PY
}

lg_common=(--format json --write-size 4MB --chunk-size 4MB --checksum CRC32 --bytes-per-checksum 16KB)
echo "writing the read data set: $read_mb MB (4 writers, 4 MB writes) to the memory dn-sim..." >&2
"$LOADGEN" write --target "127.0.0.1:$memory_port" "${lg_common[@]}" "${extra[@]}" -t 4 -n "$writes" \
    --manifest "$work/blocks.jsonl" >"$work/seed.json"

configs=("1 1" "4 1" "4 4")
: >"$work/rows"
for round in $(seq "$rounds"); do
    echo "round $round of $rounds..." >&2
    cell "$iperf_pid" iperf3 iperf3 iperf3 -c 127.0.0.1 -p "$iperf_port" -P 1 -t "$duration" -J
    for c in "${configs[@]}"; do
        read -r t n <<<"$c"
        cell "$discard_pid" "write-${t}x$n" write "$LOADGEN" write --target "127.0.0.1:$discard_port" \
            "${lg_common[@]}" "${extra[@]}" -t "$t" --clients "$n" --duration "${duration}s"
    done
    for c in "${configs[@]}"; do
        read -r t n <<<"$c"
        cell "$memory_pid" "read-${t}x$n" read "$LOADGEN" read --target "127.0.0.1:$memory_port" \
            "${lg_common[@]}" "${extra[@]}" -t "$t" --clients "$n" --manifest "$work/blocks.jsonl"
    done
done

python3 - "$work/rows" "$rounds" "$duration" "$read_mb" "$(nproc)" "${LOADGEN_ARGS:-}" >"$work/table.md" <<'PY'
import statistics, sys
path, rounds, duration, read_mb, cores, extra = sys.argv[1:]
rows = [l.split() for l in open(path) if l.strip()]
# cell -> round -> (MB/s, client ms/MB, server ms/MB, both ms/MB)
cells = {}
for rnd, name, rate, client, server, mb in rows:
    c, s = float(client) * 1e3 / float(mb), float(server) * 1e3 / float(mb)
    cells.setdefault(name, {})[rnd] = (float(rate), c, s, c + s)
med = statistics.median
base = cells["iperf3"]
labels = {
    "iperf3": "iperf3, 1 stream",
    "write-1x1": "write, 1 writer, 1 conn",
    "write-4x1": "write, 4 writers, 1 conn",
    "write-4x4": "write, 4 writers, 4 conns",
    "read-1x1": "read, 1 reader, 1 conn",
    "read-4x1": "read, 4 readers, 1 conn",
    "read-4x4": "read, 4 readers, 4 conns",
}
print(f"4 MB chunks, CRC32 per 16 KB; {rounds} round(s), {duration} s per iperf3/write cell, reads of a "
      f"{read_mb} MB data set; {cores} cores shared by client and server. Median over rounds; "
      f"x iperf3 = median of per-round ratios to iperf3's figure. CPU = user + system ms per MB "
      f"(2^20 bytes); server = iperf3 -s or dn-sim; over loopback the kernel's TCP work lands on "
      f"whichever side runs, so the client/server split moves from round to round and 'both' "
      f"(client + server) is the steadier figure."
      + (f" loadgen flags: {extra}." if extra else ""))
print()
print("| run | MB/s | x iperf3 | client CPU ms/MB | x iperf3 | server CPU ms/MB | x iperf3 | "
      "both ms/MB | x iperf3 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for name, label in labels.items():
    per = cells.get(name)
    if not per:
        continue
    vals = [per[r] for r in sorted(per)]
    ratio = [[per[r][i] / base[r][i] for r in sorted(per)] for i in range(4)]
    m = [med(v[i] for v in vals) for i in range(4)]
    print(f"| {label} | {m[0]:.0f} | {med(ratio[0]):.2f} | {m[1]:.3f} | {med(ratio[1]):.2f} | "
          f"{m[2]:.3f} | {med(ratio[2]):.2f} | {m[3]:.3f} | {med(ratio[3]):.2f} |")
print()
def rate(name):
    return med(cells[name][r][0] for r in cells[name])
def ratio(name):
    return med(cells[name][r][0] / base[r][0] for r in cells[name])
writes = ["write-1x1", "write-4x1", "write-4x4"]
reads = ["read-1x1", "read-4x1", "read-4x4"]
w_ok = all(ratio(n) >= 0.5 for n in writes)
r_ok = all(ratio(n) >= 0.5 for n in reads)
print(f"Goal >= 0.5x iperf3: writes {'met' if w_ok else 'NOT met'} "
      f"({', '.join(f'{ratio(n):.2f}' for n in writes)}), reads {'met' if r_ok else 'NOT met'} "
      f"({', '.join(f'{ratio(n):.2f}' for n in reads)}).")
for kind, ns in (("writers", writes), ("readers", reads)):
    one, four1, four4 = (rate(n) for n in ns)
    ok = four1 >= one and four4 >= one
    print(f"Goal 4 {kind} >= 1: {'met' if ok else 'NOT met'} (1x1 {one:.0f}, 4x1 {four1:.0f}, "
          f"4x4 {four4:.0f} MB/s).")
print()
print("Per round: MB/s (client / server CPU ms per MB).")
print()
names = [n for n in labels if n in cells]
print("| round | " + " | ".join(names) + " |")
print("|---:|" + "---:|" * len(names))
for r in sorted(base, key=int):
    print(f"| {r} | " + " | ".join(
        f"{cells[n][r][0]:.0f} ({cells[n][r][1]:.2f} / {cells[n][r][2]:.2f})" for n in names) + " |")
PY
cat "$work/table.md"
if [[ -n "$out" ]]; then
    cp "$work/table.md" "$out"
    cp "$work/rows" "$out.rows"
fi
