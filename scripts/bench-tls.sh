#!/usr/bin/env bash
# What TLS costs: in one run, alternating in every round, release builds of
#   - `loadgen echo` (0-byte payloads, many calls: per-call cost) and
#   - `loadgen write` of 4 MB WriteChunks (CRC32 per 16 KB; bulk cost)
# against two dn-sims with --store discard, one plain and one with --tls-cert (a P-256 certificate
# made here with openssl; rustls, TLS 1.3, AES-GCM). Each cell: calls/s, MB/s, p50/p99 ms, and
# client and server CPU (user + system seconds: the client's rusage, the server's /proc/PID/stat
# before and after). The summary is the median over rounds and TLS/plain ratios of the medians.
# Numbers are noisy on a shared machine (other builds run): read the ratios, not the digits.
#
# Usage: scripts/bench-tls.sh [--rounds N] [--duration D] [--out FILE]
#   --rounds N     rounds, each running every cell once (default 3)
#   --duration D   seconds per cell: 5 or 5s (default 5s)
#   --out FILE     also write the table (markdown) to FILE and the raw cells to FILE.rows
# Environment: LOADGEN, DN_SIM (default: release builds, built here with CARGO_BUILD_JOBS,
# default 1), ECHO_ARGS (default "-t 16 --clients 2"), WRITE_ARGS (default "-t 4 --clients 1").
# Starts its own dn-sims on free 127.0.0.1 ports and stops only those. Exit: 0 done, 2 bad flag,
# 1 a run failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

rounds=3
duration=5
out=""
usage_error() {
    echo "bench-tls.sh: $1 (see --help)" >&2
    exit 2
}
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds | --duration | --out)
            [[ $# -ge 2 ]] || usage_error "$1 needs a value"
            case "$1" in
                --rounds) rounds=$2 ;;
                --duration) duration=${2%s} ;;
                --out) out=$2 ;;
            esac
            shift 2
            ;;
        -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) usage_error "unknown argument '$1'" ;;
    esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || usage_error "--rounds must be a positive integer, not '$rounds'"
[[ "$duration" =~ ^[1-9][0-9]*$ ]] || usage_error "--duration must be whole seconds (5 or 5s), not '$duration'"

command -v openssl >/dev/null 2>&1 || ensure_debian_packages openssl
command -v python3 >/dev/null 2>&1 || ensure_debian_packages python3
release_binaries
read -r -a echo_args <<<"${ECHO_ARGS:--t 16 --clients 2}"
read -r -a write_args <<<"${WRITE_ARGS:--t 4 --clients 1}"

scratch_and_cleanup

# A CA and a server certificate for 127.0.0.1 it signed. P-256 rather than Ozone's default RSA
# (hdds.key.algo): each connection does one handshake, so the key type hardly shows; the bulk
# cipher is what is measured.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=bench-tls CA" -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=127.0.0.1" -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
    >"$work/ext.cnf"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
    -CAcreateserial -days 2 -extfile "$work/ext.cnf" -out "$work/server.pem" 2>/dev/null

start_dn_sim "$work/plain.ready" "$DN_SIM" --metrics-listen none --store discard \
    2>"$work/plain.log"
plain_pid=$dn_pid plain_port=$ready_port
pids+=("$plain_pid")
start_dn_sim "$work/tls.ready" "$DN_SIM" --metrics-listen none --store discard \
    --tls-cert "$work/server.pem" --tls-key "$work/server.key" 2>"$work/tls.log"
tls_pid=$dn_pid tls_port=$ready_port
pids+=("$tls_pid")

tick=$(getconf CLK_TCK)
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

# One cell: "round cell calls/s MB/s p50 p99 client-cpu-s server-cpu-s" appended to $work/rows.
cell() {
    local server=$1 name=$2 s0 s1 c
    shift 2
    s0=$(proc_cpu "$server")
    if ! c=$(cpu_of "$@"); then
        echo "bench-tls.sh: $name failed: $*" >&2
        cat "$work/err" "$work/out" >&2
        return 1
    fi
    s1=$(proc_cpu "$server")
    python3 - "$work/out" "$round" "$name" "$c" "$s0" "$s1" >>"$work/rows" <<'PY'
import json, sys
path, rnd, name, client, s0, s1 = sys.argv[1:]
r = json.load(open(path))
assert not r["errors"], r["errors"]
secs = r["elapsed_s"]
if name.startswith("echo"):
    calls = r["totals"]["successes"]
    pct = {p["percentile"]: p["ms"] for p in r["latency"]["corrected"]["percentiles"]}
    p50, p99 = pct[50.0], pct[99.0]
    mb = (r["totals"]["bytes_sent"] + r["totals"]["bytes_received"]) / 2**20
else:
    op = r["ops"]["WriteChunk"]
    calls = op["count"]
    p50, p99 = op["percentiles_ms"]["p50"], op["percentiles_ms"]["p99"]
    mb = r["write"]["bytes"] / 2**20
    secs = r["write"]["elapsed_s"]
print(rnd, name, f"{calls / secs:.1f}", f"{mb / secs:.1f}", p50, p99, client,
      f"{float(s1) - float(s0):.3f}")
PY
}

lg_write=(--write-size 4MB --chunk-size 4MB --checksum CRC32 --bytes-per-checksum 16KB)
tls_flags=(--tls --tls-ca "$work/ca.pem")
: >"$work/rows"
for round in $(seq "$rounds"); do
    echo "round $round of $rounds..." >&2
    cell "$plain_pid" echo-plain "$LOADGEN" echo --target "127.0.0.1:$plain_port" --format json \
        "${echo_args[@]}" --duration "${duration}s"
    cell "$tls_pid" echo-tls "$LOADGEN" echo --target "127.0.0.1:$tls_port" --format json \
        "${tls_flags[@]}" "${echo_args[@]}" --duration "${duration}s"
    cell "$plain_pid" write-plain "$LOADGEN" write --target "127.0.0.1:$plain_port" --format json \
        "${lg_write[@]}" "${write_args[@]}" --duration "${duration}s"
    cell "$tls_pid" write-tls "$LOADGEN" write --target "127.0.0.1:$tls_port" --format json \
        "${tls_flags[@]}" "${lg_write[@]}" "${write_args[@]}" --duration "${duration}s"
done

python3 - "$work/rows" "$rounds" "$duration" "$(nproc)" "${echo_args[*]}" "${write_args[*]}" \
    >"$work/table.md" <<'PY'
import statistics, sys
path, rounds, duration, cores, echo_args, write_args = sys.argv[1:]
cells = {}
for rnd, name, calls, mb, p50, p99, client, server in (l.split() for l in open(path) if l.strip()):
    cells.setdefault(name, []).append(
        (float(calls), float(mb), float(p50), float(p99), float(client), float(server)))
med = statistics.median
print(f"dn-sim --store discard, plain vs --tls-cert (rustls, TLS 1.3, P-256); {rounds} round(s) of "
      f"{duration} s per cell, alternating; {cores} cores shared by client, server and whatever "
      f"else runs. echo: 0-byte payloads, {echo_args}; write: 4 MB WriteChunks, CRC32 per 16 KB, "
      f"{write_args}. Median over rounds. CPU: user + system seconds per cell (client: loadgen's "
      f"rusage; server: dn-sim's /proc/PID/stat), and ms per 1,000 calls (echo) or per MB (write).")
print()
print("| run | calls/s | MB/s | p50 ms | p99 ms | client CPU s | server CPU s | client CPU per unit | server CPU per unit |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
summary = {}
for name in ["echo-plain", "echo-tls", "write-plain", "write-tls"]:
    rows = cells.get(name)
    if not rows:
        continue
    m = [med(r[i] for r in rows) for i in range(6)]
    secs = float(duration)
    if name.startswith("echo"):
        unit = "ms/1k calls"
        per = [med(r[i] * 1e3 / (r[0] * secs / 1e3) for r in rows) for i in (4, 5)]
    else:
        unit = "ms/MB"
        per = [med(r[i] * 1e3 / (r[1] * secs) for r in rows) for i in (4, 5)]
    summary[name] = m + per
    print(f"| {name} | {m[0]:.0f} | {m[1]:.1f} | {m[2]:.3f} | {m[3]:.3f} | {m[4]:.2f} | {m[5]:.2f} | "
          f"{per[0]:.3f} {unit} | {per[1]:.3f} {unit} |")
print()
for kind in ["echo", "write"]:
    p, t = summary.get(f"{kind}-plain"), summary.get(f"{kind}-tls")
    if p and t:
        print(f"{kind}: TLS/plain calls/s {t[0] / p[0]:.2f}, p50 {t[2] / p[2]:.2f}, p99 "
              f"{t[3] / p[3]:.2f}, client CPU per unit {t[6] / p[6]:.2f}, server CPU per unit "
              f"{t[7] / p[7]:.2f}.")
PY
cat "$work/table.md"
if [[ -n "$out" ]]; then
    cp "$work/table.md" "$out"
    cp "$work/rows" "$out.rows"
fi
