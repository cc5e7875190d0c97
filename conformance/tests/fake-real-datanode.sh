#!/usr/bin/env bash
# A stand-in for scripts/real-datanode.sh that runs dn-sim behind the real-DataNode launch
# protocol, so the runner's "real" side can be tested without Ozone:
#
#   fake-real-datanode.sh DN_SIM [DN_SIM_ARGS...] --containers LIST --info FILE [-D KEY=VALUE...]
#
# It starts DN_SIM on free 127.0.0.1 ports, writes FILE (`datanode`, `uuid`, `http` lines), prints
# `datanode 127.0.0.1:PORT` once it serves, and stops dn-sim when its stdin closes or on SIGTERM.
set -u

dn_sim="$1"
shift
containers=1
info=
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --containers) containers="$2"; shift ;;
        --info) info="$2"; shift ;;
        -D) args+=(-D "$2"); shift ;;
        *) args+=("$1") ;;
    esac
    shift
done
if [ -z "$info" ]; then
    echo "fake-real-datanode: --info FILE is required" >&2
    exit 2
fi

uuid=$(cat /proc/sys/kernel/random/uuid)
uuid_args=()
if "$dn_sim" --help 2>/dev/null | grep -q -- '--datanode-uuid'; then
    uuid_args=(--datanode-uuid "$uuid")
fi

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pick_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 40000))
        listening "$p" || { echo "$p"; return; }
    done
}

pid=
reader=
stop() {
    [ -n "$reader" ] && kill "$reader" 2>/dev/null
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    exit 0
}
trap stop TERM INT

for attempt in 1 2 3; do
    port=$(pick_port)
    http=$(pick_port)
    [ "$port" = "$http" ] && continue
    "$dn_sim" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$http" \
        --containers "$containers" "${uuid_args[@]}" "${args[@]}" </dev/null >&2 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        if listening "$port" && listening "$http"; then
            break
        fi
        sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
        break
    fi
    wait "$pid" 2>/dev/null
    pid=
    echo "fake-real-datanode: dn-sim did not start (attempt $attempt)" >&2
done
[ -n "$pid" ] || exit 1

printf 'datanode 127.0.0.1:%s\nuuid %s\nhttp 127.0.0.1:%s\n' "$port" "$uuid" "$http" > "$info"
echo "datanode 127.0.0.1:$port"

# Serve until stdin closes (the runner keeps it open) or dn-sim exits.
exec 3<&0
cat <&3 >/dev/null &
reader=$!
wait -n "$reader" "$pid"
stop
