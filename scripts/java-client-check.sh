#!/usr/bin/env bash
# Ozone 2.2.0's own Java client (hdds-client: XceiverClientGrpc over a STANDALONE pipeline built
# without SCM, ContainerProtocolCalls, Checksum, BlockOutputStream/BlockInputStream; then
# XceiverClientRatis and RatisBlockOutputStream over a RATIS/ONE pipeline on dn-sim's Ratis port)
# against a dn-sim: interop/ozone's ClientCheck. Builds the harness and dn-sim, starts dn-sim on a
# loopback port it binds itself (port 0, --ready-file), runs ClientCheck (one `PASS name` or
# `FAIL name: why` line per check, then `N passed, M failed`), stops dn-sim and exits with
# ClientCheck's status (0: all passed).
#
# With --real-datanode the same checks run against a real Ozone DataNode instead
# (scripts/real-datanode.sh, its containers 1-10 on a RATIS/ONE pipeline): what dn-sim must match.
#
# Usage: scripts/java-client-check.sh [--real-datanode] [ClientCheck flags]... [-- dn-sim flags...]
#   ClientCheck flags: --container ID (new, default 4242), --block-container ID (default 1),
#                      --big-block-mb N (default 64; 0 skips the stream blocks)
#   e.g. scripts/java-client-check.sh --big-block-mb 0 -- --verify-checksums
# Exit 3 (and one line on stderr) only when Maven Central (or, installing Java/Maven, Debian's
# archive) is out of reach, as a probe showed: nothing was checked. A harness that does not build
# with the registry in reach (a compile error) exits 1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
version=2.2.0
check_args=()
sim_args=()
real=""
while [ $# -gt 0 ]; do
    case "$1" in
        --) shift; sim_args=("$@"); break ;;
        --real-datanode) real=1; shift ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) check_args+=("$1"); shift ;;
    esac
done

. scripts/lib.sh
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
harness_setup java-client-check.sh "$version" || exit $?
if [ -n "$real" ]; then
    . scripts/lib/real-datanode.sh
    work="$(mktemp -d "${TMPDIR:-/tmp}/java-client-check-real.XXXXXX")"
    trap 'real_dn_stop; rm -rf "$work"; rm -f "$log"' EXIT
    real_dn_start "$work" "$version" --containers 1-10 --info "$work/info" ||
        { echo "java-client-check.sh: the real DataNode did not start" >&2; exit 1; }
    cp="$root/interop/ozone/target/classes-$version:$(cat "$root/interop/ozone/target/classpath-$version.txt")"
    . "$root/scripts/lib/ozone-java.sh"
    ozone_jvm_flags 1g
    status=0
    (cd "$work" && exec java "${jvm[@]}" -cp "$cp" org.ozonedn.interop.ClientCheck \
        --target "$dn_addr" --ratis "$dn_ratis" --pipeline-id "$dn_pipeline" \
        --datanode-uuid "$(awk '$1 == "uuid" {print $2}' "$work/info")" \
        ${check_args[@]+"${check_args[@]}"} </dev/null) || status=$?
    exit "$status"
fi
cargo build -q --locked -p dn-sim

# dn-sim binds port 0 and writes the address it got to a ready file: no port is guessed.
ready="$(mktemp -u "${TMPDIR:-/tmp}/java-client-check-ready.XXXXXX")"
target/debug/dn-sim --listen 127.0.0.1:0 --metrics-listen none --ratis-listen 127.0.0.1:0 \
    --containers 1-10 --ready-file "$ready" \
    ${sim_args[@]+"${sim_args[@]}"} >"$log" 2>&1 &
sim_pid=$!
# Ready when the file is there (10 s at most): written after the listener is bound.
addr=
for _ in $(seq 1 100); do
    if ! kill -0 "$sim_pid" 2>/dev/null; then
        echo "java-client-check.sh: dn-sim exited before serving: $(tail -3 "$log")" >&2
        exit 1
    fi
    if [ -f "$ready" ]; then
        addr="$(awk '$1 == "client" {print $2}' "$ready")"
        ratis="$(awk '$1 == "ratis" {print $2}' "$ready")"
        break
    fi
    sleep 0.1
done
rm -f "$ready"
[ -n "$addr" ] || { echo "java-client-check.sh: dn-sim wrote no ready file within 10 s" >&2; exit 1; }

cp="$root/interop/ozone/target/classes-$version:$(cat "$root/interop/ozone/target/classpath-$version.txt")"
# The JVM flags Ozone needs on Java 17; 64 MB blocks are held twice: 1 GiB of heap.
. "$root/scripts/lib/ozone-java.sh"
ozone_jvm_flags 1g
# Ozone's native-library loader unpacks into the working directory: run from a scratch one.
work="$(mktemp -d "${TMPDIR:-/tmp}/java-client-check-cwd.XXXXXX")"
status=0
(cd "$work" && exec java "${jvm[@]}" -cp "$cp" org.ozonedn.interop.ClientCheck \
    --target "$addr" --ratis "$ratis" ${check_args[@]+"${check_args[@]}"} </dev/null) || status=$?
rm -rf "$work"

kill -TERM "$sim_pid" 2>/dev/null || true
wait "$sim_pid" 2>/dev/null || true
sim_pid=
exit "$status"
