#!/usr/bin/env bash
# Keys in EC on simulated DataNodes (Ozone 2.2.0): starts OM and SCM (scripts/real-cluster.sh)
# and five dn-sim processes with `--scm` (memory store: the data is kept), then
#  1. the real `ozone freon ockg` writes keys into an EC rs-3-2-1024k bucket and `ozone freon
#     ockv` reads every one back (each must match the first's digest); prints ockg's keys/s;
#  2. the real `ozone sh key put` of a 100 MB random file and `ozone sh key get`, compared byte
#     for byte (cmp);
#  3. SCM lists each replica of the key's container the dn-sims reported (container reports);
#  4. the real `ozone admin container close C`: SCM lists the container CLOSED once the dn-sims
#     closed their replicas, and the key still reads back byte for byte;
#  5. one dn-sim is killed: SCM lists it STALE, then DEAD (short intervals: stale 6 s, dead 12 s)
#     and the key still reads back from the other four (rs-3-2 survives two losses).
# Exit 0 when all of that holds, 3 only when Maven Central is out of reach (scripts/lib.sh
# harness_setup), 1 otherwise.
# Usage: scripts/ec-cluster-check.sh [--keys N]   (DN_SIM=path to use a built dn-sim)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
keys=20
while [ $# -gt 0 ]; do
    case "$1" in
        --keys) keys="${2:?--keys needs a value}"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "ec-cluster-check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$keys" in ''|*[!0-9]*|0) echo "ec-cluster-check.sh: --keys takes a positive number" >&2; exit 2 ;; esac
nodes=5
. scripts/lib.sh
harness_setup ec-cluster-check.sh 2.2.0 || exit $?
harness_setup ec-cluster-check.sh 2.2.0 --freon || exit $?
dn_sim="${DN_SIM:-}"
if [ -z "$dn_sim" ]; then
    cargo build -q --locked -p dn-sim
    dn_sim=target/debug/dn-sim
fi
fail() { echo "ec-cluster-check.sh: $*" >&2; exit 1; }

work="$(mktemp -d)"
fifo="$work/stdin"
mkfifo "$fifo"
# Heartbeats every second; SCM marks a node STALE after 6 s and DEAD after 12 s of silence.
scripts/real-cluster.sh --conf-out "$work/ozone-site.xml" \
    -D hdds.heartbeat.interval=1s -D ozone.scm.stale.node.interval=6s \
    -D ozone.scm.dead.node.interval=12s \
    <"$fifo" >"$work/out" 2>"$work/cluster.log" &
cluster=$!
exec 9>"$fifo" # holds the cluster's stdin open; closing it stops the cluster
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    exec 9>&-
    kill -TERM "$cluster" 2>/dev/null || true
    wait "$cluster" 2>/dev/null || true
    [ -n "${KEEP_WORK:-}" ] && { echo "kept $work" >&2; return; }
    rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 1 300); do
    grep -q '^scm ' "$work/out" && break
    kill -0 "$cluster" 2>/dev/null || { tail -20 "$work/cluster.log" >&2; fail "the cluster did not start"; }
    sleep 1
done
scm="$(awk '/^scm /{print $2}' "$work/out")"
url="$(awk '/^nodes /{print $2}' "$work/out")"
[ -n "$scm" ] && [ -n "$url" ] || fail "no scm line within 300 s"
echo "OM and SCM of Ozone 2.2.0 up; SCM's DataNode port $scm"

for i in $(seq 1 "$nodes"); do
    start_dn_sim "$work/ready-$i" "$dn_sim" --scm "$scm" --capacity 100GB --store memory \
        -D hdds.heartbeat.interval=1s -D hdds.container.report.interval=10s \
        >"$work/dn-$i.log" 2>&1 || { tail -5 "$work/dn-$i.log" >&2; exit 1; }
    pids+=("$dn_pid")
done
list=""
deadline=$(( $(date +%s) + 60 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    list="$(curl -sf "$url" || true)"
    [ "$(grep -c ' IN_SERVICE HEALTHY ' <<<"$list" || true)" = "$nodes" ] && break
    sleep 0.5
done
[ "$(grep -c ' IN_SERVICE HEALTHY ' <<<"$list" || true)" = "$nodes" ] || { echo "$list" >&2; fail "SCM does not list $nodes HEALTHY nodes within 60 s"; }
echo "SCM lists $nodes dn-sim nodes HEALTHY"

. scripts/lib/real-datanode.sh
# A real `ozone` command (freon, sh, admin) on freon's classpath, output in $work/NAME.txt;
# freon prints its report only on a console: a pseudo-terminal.
run_ozone() {
    local name=$1 main=$2
    shift 2
    freon_cmd 2.2.0 "$work/ozone-site.xml" -- "$@"
    local i
    for i in "${!freon[@]}"; do
        [ "${freon[$i]}" = org.apache.hadoop.ozone.freon.Freon ] && freon[$i]=$main
    done
    printf '%q ' "${freon[@]}" >"$work/$name-cmd.sh"
    timeout 300 script -qec "bash $work/$name-cmd.sh" /dev/null >"$work/$name.txt" 2>&1 </dev/null
}
freon_main=org.apache.hadoop.ozone.freon.Freon
sh_main=org.apache.hadoop.ozone.shell.OzoneShell
admin_main=org.apache.hadoop.ozone.admin.OzoneAdmin

# 1. ockg and ockv into an EC bucket.
run_ozone sh-vol "$sh_main" volume create /vol1 || { cat "$work/sh-vol.txt" >&2; fail "ozone sh volume create failed"; }
run_ozone sh-bucket "$sh_main" bucket create --type EC --replication rs-3-2-1024k /vol1/ecbucket \
    || { cat "$work/sh-bucket.txt" >&2; fail "ozone sh bucket create failed"; }
status=0
start=$(date +%s.%N)
run_ozone ockg "$freon_main" ockg -v vol1 -b ecbucket -p ec -n "$keys" -t 4 -s 1MB \
    --type EC --replication rs-3-2-1024k || status=$?
took="$(awk -v now="$(date +%s.%N)" -v t0="$start" 'BEGIN { printf "%.1f", now - t0 }')"
grep -E 'mean rate|count =|Successful executions|Failures|Total execution' "$work/ockg.txt" || true
if [ "$status" != 0 ] || ! grep -q "^Successful executions: $keys" "$work/ockg.txt"; then
    tail -40 "$work/ockg.txt" >&2
    fail "freon ockg into rs-3-2-1024k did not write $keys keys (exit $status)"
fi
echo "freon ockg (Ozone 2.2.0): $keys keys of 1 MB into /vol1/ecbucket (rs-3-2-1024k) in $took s"
status=0
run_ozone ockv "$freon_main" ockv -v vol1 -b ecbucket -p ec -n "$keys" -t 4 || status=$?
grep -E 'Successful executions|Failures' "$work/ockv.txt" || true
if [ "$status" != 0 ] || ! grep -q "^Successful executions: $keys" "$work/ockv.txt"; then
    tail -40 "$work/ockv.txt" >&2
    fail "freon ockv did not read back $keys keys (exit $status)"
fi
echo "freon ockv: $keys keys read back with the first key's digest"
