#!/usr/bin/env bash
# Keys in EC and RATIS on simulated DataNodes (Ozone 2.2.0): starts OM and SCM (scripts/real-cluster.sh)
# and five dn-sim processes with `--scm` (memory store: the data is kept), then
#  1. the real `ozone freon ockg` writes keys into an EC rs-3-2-1024k bucket and `ozone freon
#     ockv` reads every one back (each must match the first's digest); prints ockg's rate;
#  2. the real `ozone sh key put` of a 100 MB random file and `ozone sh key get`, compared byte
#     for byte (cmp);
#  3. SCM lists each replica of the key's container the dn-sims reported (container reports);
#  4. the real `ozone admin container close C`: SCM lists the container CLOSED once the dn-sims
#     closed their replicas, and the key still reads back byte for byte;
#  5. RATIS/THREE: ockg/ockv into a RATIS/THREE bucket through the Raft groups SCM created on the
#     dn-sims, then `ozone admin container create --type RATIS --replication THREE` and the real
#     `freon dn-echo --ratis --container-id C` over Ratis to its leader (200 of 200);
#  6. one dn-sim is killed: SCM lists it STALE, then DEAD (short intervals: stale 6 s, dead 12 s
#     with 1 s heartbeats)
#     and the key still reads back from the other four (rs-3-2 survives two losses).
# Exit 0 when all of that holds, 3 only when Maven Central is out of reach (scripts/lib.sh
# harness_setup), 1 otherwise.
# With --mixed, a mixed cluster instead: one real Ozone 2.2.0 DataNode (in the cluster's JVM)
# beside N-1 dn-sims; steps 1-3 only (EC keys across both; SCM must list a replica of the key's
# container on the real DataNode and on dn-sims). RATIS pipelines are not mixed: dn-sims do not
# speak Raft to a real DataNode.
# Usage: scripts/cluster-check.sh [--keys N] [--nodes N] [--heartbeat Ns] [--ockg-only|--mixed]
#   --keys 20, --nodes 5 (DataNodes), --heartbeat 1s (theirs), --ockg-only: stop after
#   ockg/ockv (a measurement, e.g. --nodes 100 --keys 500). DN_SIM=path uses a built dn-sim;
#   KEEP_WORK=1 keeps the scratch directory (logs, the output of every ozone command).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
keys=20
nodes=5
ockg_only=0
mixed=0
heartbeat=1s
while [ $# -gt 0 ]; do
    case "$1" in
        --keys) keys="${2:?--keys needs a value}"; shift 2 ;;
        --nodes) nodes="${2:?--nodes needs a value}"; shift 2 ;;
        --heartbeat) heartbeat="${2:?--heartbeat needs a value}"; shift 2 ;;
        --ockg-only) ockg_only=1; shift ;;
        --mixed) mixed=1; shift ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "cluster-check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$keys" in ''|*[!0-9]*|0) echo "cluster-check.sh: --keys takes a positive number" >&2; exit 2 ;; esac
case "$nodes" in ''|*[!0-9]*|[0-4]) echo "cluster-check.sh: --nodes takes a number of at least 5 (rs-3-2)" >&2; exit 2 ;; esac
case "$heartbeat" in [1-9]s|[1-9][0-9]s) ;; *) echo "cluster-check.sh: --heartbeat takes 1s..99s" >&2; exit 2 ;; esac
. scripts/lib.sh
harness_setup cluster-check.sh 2.2.0 || exit $?
harness_setup cluster-check.sh 2.2.0 --freon || exit $?
dn_sim="${DN_SIM:-}"
if [ -z "$dn_sim" ]; then
    cargo build -q --locked -p dn-sim
    dn_sim=target/debug/dn-sim
fi
fail() { echo "cluster-check.sh: $*" >&2; exit 1; }

work="$(mktemp -d)"
fifo="$work/stdin"
mkfifo "$fifo"
# SCM marks a node STALE after 6 and DEAD after 12 heartbeat intervals of silence (SCM raises
# the stale interval to 5 x ozone.scm.heartbeat.thread.interval and 3 x hdds.heartbeat.interval,
# the dead one to 2 x stale: HddsServerUtil, Ozone 2.2.0). SCM sends
# closeContainer ozone.scm.close.container.wait.duration (150 s) after a container starts closing.
real=()
[ "$mixed" = 1 ] && real=(--datanodes 1)
scripts/real-cluster.sh --conf-out "$work/ozone-site.xml" "${real[@]}" \
    -D hdds.heartbeat.interval="$heartbeat" -D ozone.scm.stale.node.interval="$((6 * ${heartbeat%s}))s" \
    -D ozone.scm.dead.node.interval="$((12 * ${heartbeat%s}))s" -D ozone.scm.heartbeat.thread.interval=1s \
    -D ozone.scm.close.container.wait.duration=2s \
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

sims=$((nodes - mixed))
for i in $(seq 1 "$sims"); do
    start_dn_sim "$work/ready-$i" "$dn_sim" --scm "$scm" --capacity 100GB --store memory \
        -D hdds.heartbeat.interval="$heartbeat" -D hdds.container.report.interval=10s \
        >"$work/dn-$i.log" 2>&1 || { tail -5 "$work/dn-$i.log" >&2; exit 1; }
    pids+=("$dn_pid")
done
list=""
deadline=$(( $(date +%s) + 60 + nodes ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    list="$(curl -sf "$url" || true)"
    [ "$(grep -c ' IN_SERVICE HEALTHY ' <<<"$list" || true)" = "$nodes" ] && break
    sleep 0.5
done
[ "$(grep -c ' IN_SERVICE HEALTHY ' <<<"$list" || true)" = "$nodes" ] || { echo "$list" >&2; fail "SCM does not list $nodes HEALTHY nodes within 60 s"; }
real_uuid=""
if [ "$mixed" = 1 ]; then
    # The real DataNode: the node no dn-sim's log names.
    for u in $(awk '{print $1}' <<<"$list"); do
        cat "$work"/dn-*.log | grep -q "$u" || real_uuid=$u
    done
    [ -n "$real_uuid" ] || fail "no node in SCM's list is the real DataNode"
    echo "SCM lists $nodes nodes HEALTHY: the real DataNode $real_uuid and $sims dn-sims"
else
    echo "SCM lists $nodes dn-sim nodes HEALTHY"
fi

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
# Resident memory of the dn-sim processes now (the data they hold included).
for p in "${pids[@]}"; do awk '/^VmRSS:/ {print $2}' "/proc/$p/status"; done |
    awk '{s += $1; if ($1 > m) m = $1} END {printf "dn-sim RSS after ockv: mean %.1f MiB, max %.1f MiB over %d processes\n", s / NR / 1024, m / 1024, NR}'
[ "$ockg_only" = 1 ] && exit 0

# 2. ozone sh key put/get of 100 MB, byte for byte.
head -c 100M /dev/urandom >"$work/big"
start=$(date +%s.%N)
run_ozone put "$sh_main" key put /vol1/ecbucket/big "$work/big" || { tail -30 "$work/put.txt" >&2; fail "ozone sh key put of 100 MB failed"; }
took="$(awk -v now="$(date +%s.%N)" -v t0="$start" 'BEGIN { printf "%.1f", now - t0 }')"
get_and_compare() {
    rm -f "$work/big.out"
    run_ozone "get-$1" "$sh_main" key get /vol1/ecbucket/big "$work/big.out" \
        || { tail -30 "$work/get-$1.txt" >&2; fail "ozone sh key get $2 failed"; }
    cmp "$work/big" "$work/big.out" || fail "the 100 MB key read back $2 differs from what was put"
}
get_and_compare 1 ""
echo "ozone sh key put (${took} s, JVM start included) and key get of 100 MB in rs-3-2-1024k: identical (cmp)"

# 3. The key's container: SCM lists a replica on each of the five dn-sims, with its index.
run_ozone info "$sh_main" key info /vol1/ecbucket/big || { cat "$work/info.txt" >&2; fail "ozone sh key info failed"; }
container="$(sed -n '/^{/,$p' "$work/info.txt" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ozoneKeyLocations"][0]["containerID"])')" \
    || { cat "$work/info.txt" >&2; fail "no container in ozone sh key info"; }
# container_info NAME: `ozone admin container info C --json`; sets state and replicas (UUID:INDEX
# sorted).
container_info() {
    run_ozone "$1" "$admin_main" container info "$container" --json || { cat "$work/$1.txt" >&2; fail "ozone admin container info failed"; }
    read -r state replicas < <(sed -n '/^{/,$p' "$work/$1.txt" | python3 -c '
import json, sys
c = json.load(sys.stdin)
reps = sorted("%s:%s" % (r["datanodeDetails"]["uuidString"], r.get("replicaIndex")) for r in c.get("replicas", []))
for r in c.get("replicas", []):
    print("  replica index=%s state=%s keyCount=%s bytesUsed=%s bcsId=%s origin=%s" % (r.get("replicaIndex"),
        r.get("state"), r.get("keyCount"), r.get("bytesUsed"), r.get("sequenceId"), r["placeOfBirth"]["uuid"]), file=sys.stderr)
print(c["containerInfo"]["state"], ",".join(reps))' 2>"$work/$1.replicas")
}
container_info cinfo-1
echo "container $container: $state; SCM's replicas, as the dn-sims reported them:"
cat "$work/cinfo-1.replicas"
[ "$(tr ',' '\n' <<<"$replicas" | grep -c .)" = 5 ] || fail "SCM does not list 5 replicas of container $container"
[ "$(tr ',' '\n' <<<"$replicas" | cut -d: -f2 | sort -n | tr '\n' ' ')" = "1 2 3 4 5 " ] || fail "the replicas of container $container lack indexes 1..5"
if [ "$mixed" = 1 ]; then
    grep -q "$real_uuid" <<<"$replicas" || fail "no replica of container $container on the real DataNode"
    echo "mixed cluster: container $container has a replica on the real DataNode and four on dn-sims"
    exit 0
fi

# 4. ozone admin container close: SCM lists it CLOSED (the dn-sims closed their replicas and
# reported them), the key still reads back.
run_ozone close "$admin_main" container close "$container" || { cat "$work/close.txt" >&2; fail "ozone admin container close failed"; }
deadline=$(( $(date +%s) + 90 ))
while :; do
    container_info cinfo-2
    [ "$state" = CLOSED ] && break
    [ "$(date +%s)" -lt "$deadline" ] || fail "container $container is $state, not CLOSED, 90 s after ozone admin container close"
    sleep 1
done
get_and_compare 2 "after the container closed"
echo "ozone admin container close $container: SCM lists it CLOSED; the key reads back identical"

# 5. RATIS/THREE: SCM created Raft groups on the dn-sims (createPipeline) and opened the pipelines
# once each group's members reported them, one as leader. ockg/ockv write and read keys through
# them; `ozone admin container create` makes a RATIS/THREE container through SCM and its leader,
# and the real `freon dn-echo --ratis` echoes to it over Ratis.
run_ozone sh-ratis "$sh_main" bucket create --type RATIS --replication THREE /vol1/ratisbucket \
    || { cat "$work/sh-ratis.txt" >&2; fail "ozone sh bucket create (RATIS/THREE) failed"; }
status=0
start=$(date +%s.%N)
run_ozone ockg-ratis "$freon_main" ockg -v vol1 -b ratisbucket -p ratis -n "$keys" -t 4 -s 1MB \
    --type RATIS --replication THREE || status=$?
took="$(awk -v now="$(date +%s.%N)" -v t0="$start" 'BEGIN { printf "%.1f", now - t0 }')"
if [ "$status" != 0 ] || ! grep -q "^Successful executions: $keys" "$work/ockg-ratis.txt"; then
    tail -40 "$work/ockg-ratis.txt" >&2
    fail "freon ockg into RATIS/THREE did not write $keys keys (exit $status)"
fi
echo "freon ockg (Ozone 2.2.0): $keys keys of 1 MB into /vol1/ratisbucket (RATIS/THREE) in $took s"
status=0
run_ozone ockv-ratis "$freon_main" ockv -v vol1 -b ratisbucket -p ratis -n "$keys" -t 4 || status=$?
if [ "$status" != 0 ] || ! grep -q "^Successful executions: $keys" "$work/ockv-ratis.txt"; then
    tail -40 "$work/ockv-ratis.txt" >&2
    fail "freon ockv did not read back $keys RATIS/THREE keys (exit $status)"
fi
echo "freon ockv: $keys RATIS/THREE keys read back with the first key's digest"
run_ozone create-ratis "$admin_main" container create --type RATIS --replication THREE \
    || { cat "$work/create-ratis.txt" >&2; fail "ozone admin container create (RATIS/THREE) failed"; }
ratis_container="$(grep -oE 'Container [0-9]+ is created' "$work/create-ratis.txt" | awk '{print $2}')"
[ -n "$ratis_container" ] || { cat "$work/create-ratis.txt" >&2; fail "no container id from ozone admin container create"; }
status=0
run_ozone echo-ratis "$freon_main" dn-echo --ratis --container-id "$ratis_container" -n 200 -t 4 || status=$?
grep -E 'Successful executions|Failures' "$work/echo-ratis.txt" || true
if [ "$status" != 0 ] || ! grep -q '^Successful executions: 200' "$work/echo-ratis.txt" || ! grep -q '^Failures: 0' "$work/echo-ratis.txt"; then
    tail -40 "$work/echo-ratis.txt" >&2
    fail "freon dn-echo --ratis on RATIS/THREE container $ratis_container did not answer 200 of 200"
fi
echo "freon dn-echo --ratis --container-id $ratis_container (RATIS/THREE, through SCM): 200 of 200 answered"

# 6. A dn-sim with a data replica (index 1) stops: STALE, then DEAD, and EC reads still work.
victim_uuid="$(tr ',' '\n' <<<"$replicas" | awk -F: '$2 == 1 {print $1}')"
victim=""
for i in $(seq 1 "$nodes"); do
    grep -q "$victim_uuid" "$work/dn-$i.log" && victim=$i
done
[ -n "$victim" ] || fail "no dn-sim log names $victim_uuid"
kill -TERM "${pids[$((victim - 1))]}"
wait "${pids[$((victim - 1))]}" 2>/dev/null || true
stopped=$(date +%s.%N)
seen_stale=""
deadline=$(( $(date +%s) + 90 ))
while :; do
    health="$(curl -sf "$url" | awk -v u="$victim_uuid" '$1 == u {print $5}')"
    if [ "$health" = STALE ] && [ -z "$seen_stale" ]; then
        seen_stale="$(awk -v now="$(date +%s.%N)" -v t0="$stopped" 'BEGIN { printf "%.1f", now - t0 }')"
    fi
    [ "$health" = DEAD ] && break
    [ "$(date +%s)" -lt "$deadline" ] || fail "dn-sim $victim_uuid is '$health', not DEAD, 90 s after it stopped"
    sleep 0.5
done
dead="$(awk -v now="$(date +%s.%N)" -v t0="$stopped" 'BEGIN { printf "%.1f", now - t0 }')"
[ -n "$seen_stale" ] || fail "SCM never listed the stopped dn-sim STALE before DEAD"
echo "stopped dn-sim $victim_uuid (replica index 1): STALE after $seen_stale s, DEAD after $dead s"
get_and_compare 3 "with a data replica's node dead"
echo "the key reads back identical from the other four (EC reconstruction on read)"
