#!/usr/bin/env bash
# A stand-in for scripts/real-datanode.sh that runs dn-sim behind the real-DataNode launch
# protocol, so the runner's "real" side can be tested without Ozone:
#
#   fake-real-datanode.sh DN_SIM [DN_SIM_ARGS...] --containers LIST --info FILE [-D KEY=VALUE...]
#
# It starts DN_SIM on 127.0.0.1 port 0 with a pipeline of its own, writes FILE (`datanode`, `uuid`,
# `http`, `ratis`, `pipeline` lines) from the ports DN_SIM reports in its ready file, prints
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

pipeline=$(cat /proc/sys/kernel/random/uuid)
ready=$(mktemp -u "${TMPDIR:-/tmp}/fake-real-datanode.XXXXXX")
pid=
reader=
stop() {
    [ -n "$reader" ] && kill "$reader" 2>/dev/null
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    rm -f "$ready"
    exit 0
}
trap stop TERM INT

# Port 0 everywhere; the ports dn-sim got come from its ready file.
"$dn_sim" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --ready-file "$ready" \
    --pipeline-id "$pipeline" --containers "$containers" "${uuid_args[@]}" "${args[@]}" </dev/null >&2 &
pid=$!
until [ -f "$ready" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "fake-real-datanode: dn-sim exited before serving" >&2
        exit 1
    fi
    sleep 0.05
done
field() { awk -v k="$1" '$1 == k {print $2}' "$ready"; }
port=$(field client)
{
    echo "datanode $port"
    echo "uuid $uuid"
    echo "http $(field admin)"
    [ -n "$(field ratis)" ] && echo "ratis $(field ratis)" && echo "pipeline $pipeline"
} > "$info"
echo "datanode $port"

# Serve until stdin closes (the runner keeps it open) or dn-sim exits.
exec 3<&0
cat <&3 >/dev/null &
reader=$!
wait -n "$reader" "$pid"
stop
