#!/usr/bin/env bash
# Simulated DataNodes in a real Ozone cluster: starts OM and SCM (scripts/real-cluster.sh, Ozone
# 2.2.0), then five dn-sim processes on port 0 with `--scm` (each with its own capacity, 1 s
# heartbeats), and waits (60 s at most) until SCM lists five nodes HEALTHY and IN_SERVICE, each
# with its dn-sim's capacity, and heartbeats that keep arriving. Then asks SCM for an EC
# rs-3-2-1024k container (SCM opens an EC pipeline over five of the nodes by itself) and runs the
# real `ozone freon dn-echo --container-id C` (Ozone 2.2.0), which finds the container's pipeline
# through SCM and echoes over gRPC to its first node: every call must succeed. (The dn-sims
# pre-create container 1, the ID a fresh SCM hands out first: an EC container's replicas are
# created by the first write, and Echo needs the container to exist.) Prints how long
# registration took, the node list and freon's report. Then ONE more dn-sim process with
# `--datanodes 5` (50 GB each): SCM must list all ten nodes HEALTHY, the five new ones with 50 GB;
# one of the five stopped through the admin endpoint (POST /datanodes/2/stop) must stop
# heartbeating (its heartbeat age in SCM passes 4 s while the others stay fresh), and started again
# it must be HEALTHY with fresh heartbeats. Exit 0 when all of that holds, 3 only when Maven
# Central is out of reach (scripts/lib.sh harness_setup), 1 otherwise.
# Usage: scripts/scm-cluster-check.sh [--nodes N]   (DN_SIM=path to use a built dn-sim)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
nodes=5
while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) nodes="${2:?--nodes needs a value}"; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "scm-cluster-check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$nodes" in ''|*[!0-9]*|0) echo "scm-cluster-check.sh: --nodes takes a positive number" >&2; exit 2 ;; esac
. scripts/lib.sh
harness_setup scm-cluster-check.sh 2.2.0 || exit $?
harness_setup scm-cluster-check.sh 2.2.0 --freon || exit $?
dn_sim="${DN_SIM:-}"
if [ -z "$dn_sim" ]; then
    cargo build -q --locked -p dn-sim
    dn_sim=target/debug/dn-sim
fi

work="$(mktemp -d)"
fifo="$work/stdin"
mkfifo "$fifo"
scripts/real-cluster.sh --conf-out "$work/ozone-site.xml" <"$fifo" >"$work/out" 2>"$work/cluster.log" &
cluster=$!
exec 9>"$fifo" # holds the cluster's stdin open; closing it stops the cluster
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    exec 9>&-
    kill -TERM "$cluster" 2>/dev/null || true
    wait "$cluster" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 1 300); do
    grep -q '^scm ' "$work/out" && break
    kill -0 "$cluster" 2>/dev/null || { tail -20 "$work/cluster.log" >&2; echo "scm-cluster-check.sh: the cluster did not start" >&2; exit 1; }
    sleep 1
done
scm="$(awk '/^scm /{print $2}' "$work/out")"
url="$(awk '/^nodes /{print $2}' "$work/out")"
[ -n "$scm" ] && [ -n "$url" ] || { echo "scm-cluster-check.sh: no scm line within 300 s" >&2; exit 1; }
[ -s "$work/ozone-site.xml" ] || { echo "scm-cluster-check.sh: no --conf-out file" >&2; exit 1; }
echo "OM and SCM of Ozone 2.2.0 up; SCM's DataNode port $scm"

start=$(date +%s.%N)
for i in $(seq 1 "$nodes"); do
    # Node i reports i × 100 GB, so each line of SCM's list must show its own dn-sim's.
    start_dn_sim "$work/ready-$i" "$dn_sim" --scm "$scm" --capacity "$((i * 100))GB" --containers 1 \
        -D hdds.heartbeat.interval=1s >"$work/dn-$i.log" 2>&1 || { tail -5 "$work/dn-$i.log" >&2; exit 1; }
    pids+=("$dn_pid")
done
echo "$nodes dn-sim processes serving"

expected="$(for i in $(seq 1 "$nodes"); do echo $((i * 100 * 1024 * 1024 * 1024)); done | sort -n | tr '\n' ' ')"
list=""
registered=""
deadline=$(( $(date +%s) + 60 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    list="$(curl -sf "$url" || true)"
    healthy="$(grep -c ' IN_SERVICE HEALTHY ' <<<"$list" || true)"
    capacities="$(grep -o 'capacity=[0-9]*' <<<"$list" | cut -d= -f2 | sort -n | tr '\n' ' ')"
    if [ "$healthy" = "$nodes" ] && [ "$capacities" = "$expected" ]; then
        [ -n "$registered" ] || registered="$(awk -v now="$(date +%s.%N)" -v t0="$start" 'BEGIN { printf "%.1f", now - t0 }')"
        # Heartbeats keep arriving: every node's last one is younger than 3 intervals, twice 3 s
        # apart.
        if [ "${checked:-0}" -ge 2 ]; then
            break
        fi
        old="$(grep -o 'heartbeat_age_ms=[0-9-]*' <<<"$list" | cut -d= -f2 | sort -n | tail -1)"
        if [ "$old" -ge 0 ] && [ "$old" -lt 3000 ]; then
            checked=$(( ${checked:-0} + 1 ))
            sleep 3
            continue
        fi
    fi
    for p in "${pids[@]}"; do
        kill -0 "$p" 2>/dev/null || { echo "scm-cluster-check.sh: a dn-sim (pid $p) exited" >&2; exit 1; }
    done
    sleep 0.5
done
echo "$list"
if [ "${checked:-0}" -lt 2 ]; then
    for i in $(seq 1 "$nodes"); do echo "-- dn-sim $i:"; tail -5 "$work/dn-$i.log"; done >&2
    grep -E 'ERROR|WARN' "$work/cluster.log" | grep -v NativeLibraryLoader | tail -10 >&2 || true
    echo "scm-cluster-check.sh: SCM does not list $nodes HEALTHY, IN_SERVICE nodes with capacities $expected and fresh heartbeats within 60 s" >&2
    exit 1
fi
echo "SCM lists $nodes dn-sim nodes HEALTHY and IN_SERVICE with their capacity $registered s after their start"

# An EC container through SCM, then the real freon dn-echo on it.
base="${url%/nodes}"
alloc="$(curl -sf "$base/allocate?replication=rs-3-2-1024k" || true)"
echo "$alloc"
container="$(awk '$1 == "container" {print $2}' <<<"$alloc")"
[ "$container" = 1 ] || { echo "scm-cluster-check.sh: SCM allocated no EC container 1 ($alloc)" >&2; exit 1; }
. scripts/lib/real-datanode.sh
freon_cmd 2.2.0 "$work/ozone-site.xml" -- dn-echo --container-id "$container" -n 200 -t 4
printf '%q ' "${freon[@]}" >"$work/freon-cmd.sh"
# freon prints its report only on a console: a pseudo-terminal.
status=0
timeout 180 script -qec "bash $work/freon-cmd.sh" /dev/null >"$work/freon.txt" 2>&1 </dev/null || status=$?
grep -E 'count =|median =|99% <=|Successful executions|Failures' "$work/freon.txt" || true
if [ "$status" != 0 ] || ! grep -q '^Successful executions: 200' "$work/freon.txt" || ! grep -q '^Failures: 0' "$work/freon.txt"; then
    tail -30 "$work/freon.txt" >&2
    echo "scm-cluster-check.sh: freon dn-echo through SCM did not succeed 200 times (exit $status)" >&2
    exit 1
fi
echo "freon dn-echo --container-id $container (Ozone 2.2.0) through SCM: 200 calls to dn-sim, 0 failures"

# One process, five identities: SCM must see five more DataNodes.
start_dn_sim "$work/ready-multi" "$dn_sim" --datanodes 5 --scm "$scm" --capacity 50GB \
    -D hdds.heartbeat.interval=1s >"$work/dn-multi.log" 2>&1 || { tail -5 "$work/dn-multi.log" >&2; exit 1; }
pids+=("$dn_pid")
multi_admin="$ready_admin"
mapfile -t multi_uuids < <(awk '$1 == "datanode" {print $3}' "$work/ready-multi")
[ "${#multi_uuids[@]}" = 5 ] || { cat "$work/ready-multi" >&2; echo "scm-cluster-check.sh: the --datanodes 5 ready file lists ${#multi_uuids[@]} identities" >&2; exit 1; }
total=$((nodes + 5))
# healthy_multi LIST: how many of the five identities SCM lists HEALTHY with 50 GB and a
# heartbeat younger than 3 s.
healthy_multi() {
    local u n=0
    for u in "${multi_uuids[@]}"; do
        grep "^$u " <<<"$1" | grep ' IN_SERVICE HEALTHY ' | grep -q " capacity=$((50 * 1024 * 1024 * 1024)) " || continue
        age="$(grep "^$u " <<<"$1" | grep -o 'heartbeat_age_ms=[0-9-]*' | cut -d= -f2)"
        [ "$age" -ge 0 ] && [ "$age" -lt 3000 ] && n=$((n + 1))
    done
    echo "$n"
}
ok=""
deadline=$(( $(date +%s) + 60 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    list="$(curl -sf "$url" || true)"
    if [ "$(grep -c ' IN_SERVICE HEALTHY ' <<<"$list" || true)" = "$total" ] && [ "$(healthy_multi "$list")" = 5 ]; then
        ok=1
        break
    fi
    kill -0 "$dn_pid" 2>/dev/null || { tail -5 "$work/dn-multi.log" >&2; echo "scm-cluster-check.sh: the --datanodes 5 dn-sim exited" >&2; exit 1; }
    sleep 0.5
done
echo "$list"
[ -n "$ok" ] || { tail -5 "$work/dn-multi.log" >&2; echo "scm-cluster-check.sh: SCM does not list the five identities of one dn-sim --datanodes 5 HEALTHY within 60 s" >&2; exit 1; }
echo "SCM lists $total nodes HEALTHY: $nodes dn-sim processes and one dn-sim --datanodes 5"

# Stop identity 2 through the admin endpoint: its heartbeats stop, the others' go on.
stopped="${multi_uuids[2]}"
curl -sf -X POST "http://$multi_admin/datanodes/2/stop" | grep -q '"stopped"' || { echo "scm-cluster-check.sh: POST /datanodes/2/stop failed" >&2; exit 1; }
silent=""
deadline=$(( $(date +%s) + 30 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    list="$(curl -sf "$url" || true)"
    age="$(grep "^$stopped " <<<"$list" | grep -o 'heartbeat_age_ms=[0-9-]*' | cut -d= -f2)"
    if [ "${age:-0}" -gt 4000 ] && [ "$(healthy_multi "$list")" = 4 ]; then
        silent=1
        break
    fi
    sleep 0.5
done
grep "^$stopped " <<<"$list" || true
[ -n "$silent" ] || { echo "scm-cluster-check.sh: identity 2 ($stopped) still heartbeats after POST /datanodes/2/stop" >&2; exit 1; }
echo "identity 2 stopped: SCM heard nothing from it for ${age} ms, the other four heartbeat on"
curl -sf -X POST "http://$multi_admin/datanodes/2/start" | grep -q '"running"' || { echo "scm-cluster-check.sh: POST /datanodes/2/start failed" >&2; exit 1; }
back=""
deadline=$(( $(date +%s) + 30 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    list="$(curl -sf "$url" || true)"
    if [ "$(healthy_multi "$list")" = 5 ]; then
        back=1
        break
    fi
    sleep 0.5
done
grep "^$stopped " <<<"$list" || true
[ -n "$back" ] || { tail -5 "$work/dn-multi.log" >&2; echo "scm-cluster-check.sh: identity 2 is not HEALTHY with fresh heartbeats within 30 s of POST /datanodes/2/start" >&2; exit 1; }
echo "identity 2 started again: HEALTHY in SCM with fresh heartbeats"
