#!/usr/bin/env bash
# Ozone 2.2.0's own Java client (hdds-client: XceiverClientGrpc over a STANDALONE pipeline built
# without SCM, ContainerProtocolCalls, Checksum, BlockOutputStream/BlockInputStream) against a
# dn-sim: interop/ozone's ClientCheck. Builds the harness and dn-sim, starts dn-sim on a free
# loopback port, runs ClientCheck (one `PASS name` or `FAIL name: why` line per check, then
# `N passed, M failed`), stops dn-sim and exits with ClientCheck's status (0: all passed).
#
# Usage: scripts/java-client-check.sh [ClientCheck flags]... [-- dn-sim flags...]
#   ClientCheck flags: --container ID (new, default 4242), --block-container ID (default 1),
#                      --big-block-mb N (default 64; 0 skips the stream block)
#   e.g. scripts/java-client-check.sh --big-block-mb 0 -- --verify-checksums
# Exit 3 (and one line on stderr) when the harness cannot be built (no Java/Maven, Maven Central out
# of reach): nothing was checked.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
version=2.2.0
check_args=()
sim_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --) shift; sim_args=("$@"); break ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) check_args+=("$1"); shift ;;
    esac
done

for tool in java mvn; do
    command -v "$tool" >/dev/null || { echo "java-client-check.sh: $tool not found (Ozone's client needs Java 17 and Maven)" >&2; exit 3; }
done
log="$(mktemp)"
sim_pid=
cleanup() {
    if [ -n "$sim_pid" ] && kill -0 "$sim_pid" 2>/dev/null; then
        kill -TERM "$sim_pid" 2>/dev/null || true
        wait "$sim_pid" 2>/dev/null || true
    fi
    rm -f "$log"
}
trap cleanup EXIT
if ! interop/ozone/setup.sh --ozone-version "$version" >"$log" 2>&1; then
    echo "java-client-check.sh: interop/ozone/setup.sh failed, so no Ozone client: $(grep -m1 -E 'ERROR|error' "$log" | cut -c1-200)" >&2
    exit 3
fi
cargo build -q --locked -p dn-sim

# A free loopback port: bind to 0, read it back, release it (a small window another process could
# take; dn-sim then fails to bind and we say so).
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
target/debug/dn-sim --listen "127.0.0.1:$port" --metrics-listen none --containers 1-10 \
    ${sim_args[@]+"${sim_args[@]}"} >"$log" 2>&1 &
sim_pid=$!
# Ready when the port accepts connections (10 s at most).
ready=
for _ in $(seq 1 100); do
    if ! kill -0 "$sim_pid" 2>/dev/null; then
        echo "java-client-check.sh: dn-sim exited before serving: $(tail -3 "$log")" >&2
        exit 1
    fi
    if python3 -c "import socket,sys; s=socket.socket(); s.settimeout(0.2); sys.exit(s.connect_ex(('127.0.0.1', $port)))" 2>/dev/null; then
        ready=1; break
    fi
    sleep 0.1
done
[ -n "$ready" ] || { echo "java-client-check.sh: dn-sim did not accept connections on 127.0.0.1:$port within 10 s" >&2; exit 1; }

cp="$root/interop/ozone/target/classes-$version:$(cat "$root/interop/ozone/target/classpath-$version.txt")"
# The JVM flags Ozone needs on Java 17; 64 MB blocks are held twice: 1 GiB of heap.
. "$root/scripts/lib/ozone-java.sh"
ozone_jvm_flags 1g
# Ozone's native-library loader unpacks into the working directory: run from a scratch one.
work="$(mktemp -d "${TMPDIR:-/tmp}/java-client-check-cwd.XXXXXX")"
status=0
(cd "$work" && exec java "${jvm[@]}" -cp "$cp" org.ozonedn.interop.ClientCheck \
    --target "127.0.0.1:$port" ${check_args[@]+"${check_args[@]}"} </dev/null) || status=$?
rm -rf "$work"

kill -TERM "$sim_pid" 2>/dev/null || true
wait "$sim_pid" 2>/dev/null || true
sim_pid=
exit "$status"
