#!/usr/bin/env bash
# What N simulated DataNodes cost in one process: starts OM and SCM (scripts/real-cluster.sh,
# Ozone 2.2.0), then ONE release dn-sim with `--datanodes N --scm` (heartbeats every
# hdds.heartbeat.interval, default 30s), waits until SCM lists N nodes HEALTHY, then samples for
# a minute (every 2 s): dn-sim's RSS (VmRSS, VmHWM of /proc/PID/status), threads, CPU seconds
# (utime + stime of /proc/PID/stat), and the largest heartbeat age SCM reports for any node
# (`heartbeat_age_ms=` of the node list) against the interval. Writes the row for N into
# results/datanodes.md (replacing an older row for the same N) and prints it. With
# --peer vapor, the same for Ozone's own `ozone vapor simulate-datanode -n N` (HDDS-7489; the
# ozone-vapor 2.2.0 jar from Maven Central on the harness's classpath): N simulated DataNodes in
# one JVM that register and heartbeat with every port 0 (no data path); its row is labelled
# `N (ozone vapor)`.
# Exit 0 when SCM listed N HEALTHY nodes, 3 only when Maven Central is out of reach, 1 otherwise
# (a late heartbeat is a number in the table, not a failure).
# Usage: scripts/measure-datanodes.sh N [--interval 30s] [--heap 2g] [--sample 60] [--peer vapor]
#        (DN_SIM=path to use a built dn-sim instead of building a release one)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
n="" interval=30s heap=2g sample=60 peer=""
while [ $# -gt 0 ]; do
    case "$1" in
        --interval) interval="${2:?--interval needs a value}"; shift 2 ;;
        --heap) heap="${2:?--heap needs a value}"; shift 2 ;;
        --sample) sample="${2:?--sample needs a value}"; shift 2 ;;
        --peer) peer="${2:?--peer needs a value}"; shift 2
            [ "$peer" = vapor ] || { echo "measure-datanodes.sh: --peer takes vapor" >&2; exit 2; } ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "measure-datanodes.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
        *) [ -z "$n" ] || { echo "measure-datanodes.sh: one N only" >&2; exit 2; }; n="$1"; shift ;;
    esac
done
case "$n" in ''|*[!0-9]*|0) echo "measure-datanodes.sh: N must be a positive number" >&2; exit 2 ;; esac
case "$interval" in *[0-9]s) ;; *) echo "measure-datanodes.sh: --interval takes seconds, e.g. 30s" >&2; exit 2 ;; esac
case "$sample" in ''|*[!0-9]*|0) echo "measure-datanodes.sh: --sample takes seconds" >&2; exit 2 ;; esac
interval_ms=$(( ${interval%s} * 1000 ))
. scripts/lib.sh
harness_setup measure-datanodes.sh 2.2.0 || exit $?
dn_sim="${DN_SIM:-}"
if [ -z "$dn_sim" ]; then
    cargo build -q --release --locked -p dn-sim
    dn_sim=target/release/dn-sim
fi

work="$(mktemp -d)"
fifo="$work/stdin"
mkfifo "$fifo"
scripts/real-cluster.sh --heap "$heap" --conf-out "$work/ozone-site.xml" -D "hdds.heartbeat.interval=$interval" \
    <"$fifo" >"$work/out" 2>"$work/cluster.log" &
cluster=$!
exec 9>"$fifo"
dn_pid=""
cleanup() {
    [ -n "$dn_pid" ] && { kill -TERM "$dn_pid" 2>/dev/null || true; wait "$dn_pid" 2>/dev/null || true; }
    exec 9>&-
    kill -TERM "$cluster" 2>/dev/null || true
    wait "$cluster" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 300); do
    grep -q '^scm ' "$work/out" && break
    kill -0 "$cluster" 2>/dev/null || { tail -20 "$work/cluster.log" >&2; echo "measure-datanodes.sh: the cluster did not start" >&2; exit 1; }
    sleep 1
done
scm="$(awk '/^scm /{print $2}' "$work/out")"
url="$(awk '/^nodes /{print $2}' "$work/out")"
[ -n "$scm" ] && [ -n "$url" ] || { echo "measure-datanodes.sh: no scm line within 300 s" >&2; exit 1; }
echo "OM and SCM of Ozone 2.2.0 up (heap $heap); SCM's DataNode port $scm"

clk=$(getconf CLK_TCK)
cpu_s() { awk -v t="$clk" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$1/stat"; }
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# start_vapor: Ozone's `ozone vapor simulate-datanode -n N` in a JVM of its own (heap as SCM's),
# configured by the cluster's client file plus SCM's DataNode port, a metadata directory and the
# heartbeat interval; Recon's address is a closed loopback port (no Recon runs: its heartbeats
# fail and are logged). Sets dn_pid.
start_vapor() {
    harness_setup measure-datanodes.sh 2.2.0 --freon || exit $?
    (cd /tmp && mvn -q -B dependency:get -Dartifact=org.apache.ozone:ozone-vapor:2.2.0 -Dtransitive=false) >/dev/null \
        || { echo "measure-datanodes.sh: cannot fetch ozone-vapor 2.2.0" >&2; exit 1; }
    local m2 jar
    m2="$(cd /tmp && mvn -q -B help:evaluate -Dexpression=settings.localRepository -DforceStdout 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' || true)"
    case "$m2" in /*) ;; *) m2="$HOME/.m2/repository" ;; esac
    jar="$m2/org/apache/ozone/ozone-vapor/2.2.0/ozone-vapor-2.2.0.jar"
    mkdir -p "$work/vapor"
    python3 - "$work/ozone-site.xml" "$work/vapor.xml" "$scm" "$work/vapor" "$interval" <<'PY'
import sys, xml.etree.ElementTree as ET
src, dst, scm, meta, interval = sys.argv[1:]
tree = ET.parse(src)
conf = tree.getroot()
def put(k, v):
    for p in conf.findall("property"):
        if p.findtext("name") == k:
            conf.remove(p)
    p = ET.SubElement(conf, "property")
    ET.SubElement(p, "name").text = k
    ET.SubElement(p, "value").text = v
host, port = scm.rsplit(":", 1)
put("ozone.scm.names", host)
put("ozone.scm.datanode.port", port)
put("ozone.scm.datanode.address", scm)
put("ozone.metadata.dirs", meta)
put("hdds.heartbeat.interval", interval)
put("ozone.recon.datanode.address", "127.0.0.1:1")
tree.write(dst)
PY
    . scripts/lib/real-datanode.sh
    freon_cmd 2.2.0 "$work/vapor.xml" -- simulate-datanode -n "$n" -c 0
    local i cp
    cp="$(cat interop/ozone/target/classpath-2.2.0.txt):$(cat interop/ozone/freon/target/classpath-2.2.0.txt):$jar"
    for i in "${!freon[@]}"; do
        case "${freon[$i]}" in
            org.apache.hadoop.ozone.freon.Freon) freon[$i]=org.apache.hadoop.ozone.freon.Vapor ;;
            -Xmx*) freon[$i]="-Xmx$heap" ;;
        esac
        [ "${freon[$i]}" = -cp ] && freon[$((i + 1))]="$cp"
    done
    "${freon[@]}" >"$work/dn.log" 2>&1 &
    dn_pid=$!
}

started=$(date +%s.%N)
# Thousands of identities take longer than one to bind their ports.
ready_wait=$(( 10 + n / 20 ))
label=$n
if [ "$peer" = vapor ]; then
    label="$n (ozone vapor)"
    start_vapor
    echo "ozone vapor simulate-datanode pid $dn_pid simulating $n DataNodes"
else
    start_dn_sim "$work/ready" "$dn_sim" --datanodes "$n" --scm "$scm" -D "hdds.heartbeat.interval=$interval" \
        >"$work/dn.log" 2>&1 || { tail -5 "$work/dn.log" >&2; exit 1; }
    echo "dn-sim pid $dn_pid serving $n identities"
fi
healthy=0
deadline=$(( $(date +%s) + 600 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    list="$(curl -sf "$url" || true)"
    healthy="$(grep -c ' IN_SERVICE HEALTHY ' <<<"$list" || true)"
    [ "$healthy" = "$n" ] && break
    kill -0 "$dn_pid" 2>/dev/null || { tail -5 "$work/dn.log" >&2; echo "measure-datanodes.sh: dn-sim exited" >&2; exit 1; }
    sleep 1
done
if [ "$healthy" != "$n" ]; then
    tail -5 "$work/dn.log" >&2
    grep -E 'ERROR|WARN' "$work/cluster.log" | grep -v NativeLibraryLoader | tail -5 >&2 || true
    echo "measure-datanodes.sh: SCM lists $healthy of $n nodes HEALTHY after 600 s" >&2
    exit 1
fi
to_healthy=$(awk -v now="$(date +%s.%N)" -v t0="$started" 'BEGIN { printf "%.1f", now - t0 }')
echo "SCM lists $n HEALTHY after $to_healthy s; sampling for $sample s"

cpu0=$(cpu_s "$dn_pid")
t0=$(date +%s.%N)
max_age=0 min_healthy=$n samples=0 late=0
end=$(( $(date +%s) + sample ))
while [ "$(date +%s)" -lt "$end" ]; do
    list="$(curl -sf "$url" || true)"
    h="$(grep -c ' IN_SERVICE HEALTHY ' <<<"$list" || true)"
    [ "$h" -lt "$min_healthy" ] && min_healthy=$h
    age="$(grep -o 'heartbeat_age_ms=[0-9-]*' <<<"$list" | cut -d= -f2 | sort -n | tail -1)"
    [ "${age:-0}" -gt "$max_age" ] && max_age=$age
    # Late: some node's last heartbeat is older than the interval plus 1 s.
    [ "${age:-0}" -gt $(( interval_ms + 1000 )) ] && late=$((late + 1))
    samples=$((samples + 1))
    sleep 2
done
cpu1=$(cpu_s "$dn_pid")
elapsed=$(awk -v now="$(date +%s.%N)" -v t="$t0" 'BEGIN { printf "%.1f", now - t }')
rss_kb=$(status_kb "$dn_pid" VmRSS)
hwm_kb=$(status_kb "$dn_pid" VmHWM)
threads=$(status_kb "$dn_pid" Threads)
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
per_kib() { awk -v k="$1" -v n="$n" 'BEGIN { printf "%.0f", k / n }'; }
cpu_pct=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$elapsed" 'BEGIN { printf "%.2f", 100 * (b - a) / t }')
on_time=$([ "$late" = 0 ] && echo yes || echo "no ($late of $samples samples late)")
row="| $label | $interval | $to_healthy | $(mib "$rss_kb") | $(mib "$hwm_kb") | $(per_kib "$rss_kb") | $threads | $cpu1 | $cpu_pct | $max_age | $min_healthy | $on_time |"
echo "$row"

out=results/datanodes.md
if [ ! -f "$out" ]; then
    cat >"$out" <<'HEAD'
# N simulated DataNodes in one dn-sim process

`scripts/measure-datanodes.sh N`: one release `dn-sim --datanodes N --scm` against the OM and SCM
of Ozone 2.2.0 (`scripts/real-cluster.sh`, one JVM) on this machine (2 cores). Memory from
`/proc/PID/status` once SCM lists N nodes HEALTHY and after a minute of heartbeats; CPU is
utime + stime of `/proc/PID/stat` (total since start, and the share of one core while sampling);
heartbeat age is the largest `heartbeat_age_ms` SCM's node manager reports for any node, sampled
every 2 s for a minute. A heartbeat is on time when no node's age passes the interval + 1 s.

| N | interval | s to all HEALTHY | RSS MiB | peak RSS MiB | RSS KiB per node | threads | CPU s total | CPU % while sampling | max heartbeat age ms | min HEALTHY | on time |
|---|---|---|---|---|---|---|---|---|---|---|---|
HEAD
fi
grep -vF "| $label | $interval |" "$out" >"$work/table"
echo "$row" >>"$work/table"
cp "$work/table" "$out"
echo "wrote $out"
