#!/usr/bin/env bash
# HTTP/2 and connection abuse against a release dn-sim: rapid reset (HEADERS +
# RST_STREAM in a loop, CVE-2023-44487), streams opened and never finished, a 4 MB WriteChunk
# that sends 1 MB and stalls, connections opened and dropped (10,000), requests with 16 KiB of
# headers, a SETTINGS flood, a PING flood, garbage instead of the preface. Each attack runs for a
# few seconds beside an honest Echo client (its own connection); per attack it prints the rate
# the attacker achieved, the honest client's answered calls and p50/p99/max latency before and
# during the attack, dn-sim's peak resident memory and how its connection and HTTP/2 counters
# moved (dn-sim/examples/abuse.rs does the work).
#
# Usage: scripts/abuse.sh [--quick] [--duration D] [--attacks NAME,...] [-- DN_SIM_FLAGS...]
#   --quick        1 s per attack, 2,000 connections in the churn (default: 3 s, 10,000)
#   --duration D   time per attack, e.g. 5s
#   --attacks      a subset: rapid-reset, stalled-streams, stalled-body, connection-churn,
#                  oversize-headers, settings-flood, ping-flood, bad-preface
#   after --        extra dn-sim flags, e.g. -- --max-concurrent-streams 100
# Environment: PROFILE (release, the default, or debug: the test command's quick run uses the
# debug build it already has), DN_SIM (default: that profile's build, built here with
# CARGO_BUILD_JOBS, default 1).
# Starts a dn-sim of its own per attack (so each peak RSS is that attack's) on free 127.0.0.1
# ports and stops only those.
# Exit: 0 done, 2 bad flag, 1 an honest call failed or dn-sim died.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib.sh

example_args=()
dn_args=()
attacks="rapid-reset,stalled-streams,stalled-body,connection-churn,oversize-headers,settings-flood,ping-flood,bad-preface"
usage_error() {
    echo "abuse.sh: $1 (see the header of scripts/abuse.sh)" >&2
    exit 2
}
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) example_args+=(--quick); shift ;;
        --duration)
            [[ $# -ge 2 ]] || usage_error "$1 needs a value"
            example_args+=("$1" "$2"); shift 2 ;;
        --attacks)
            [[ $# -ge 2 ]] || usage_error "$1 needs a value"
            attacks=$2; shift 2 ;;
        --) shift; dn_args=("$@"); break ;;
        -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
        *) usage_error "unknown flag '$1'" ;;
    esac
done

export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
PROFILE=${PROFILE:-release}
case "$PROFILE" in
    release) cargo build -q --release -p dn-sim --bin dn-sim --example abuse ;;
    debug) cargo build -q -p dn-sim --bin dn-sim --example abuse ;;
    *) usage_error "PROFILE must be release or debug, not '$PROFILE'" ;;
esac
DN_SIM=${DN_SIM:-target/$PROFILE/dn-sim}
ABUSE=target/$PROFILE/examples/abuse

dn_pid=""
ready=$(mktemp -u "${TMPDIR:-/tmp}/abuse.XXXXXX.ready")
stop_dn_sim() {
    if [[ -n $dn_pid ]]; then
        kill "$dn_pid" 2>/dev/null || true
        wait "$dn_pid" 2>/dev/null || true
        dn_pid=""
    fi
}
trap 'stop_dn_sim; rm -f "$ready"' EXIT

echo "dn-sim $("$DN_SIM" --version | cut -d' ' -f2), a fresh one per attack; flags: ${dn_args[*]:-(defaults)}"
status=0
IFS=, read -r -a attack_list <<<"$attacks"
for attack in "${attack_list[@]}"; do
    start_dn_sim "$ready" env RUST_LOG=error "$DN_SIM" "${dn_args[@]}" || exit 1
    port=$ready_port admin=${ready_admin##*:}
    wait_http "http://127.0.0.1:$admin/metrics"
    rc=0
    "$ABUSE" --target "127.0.0.1:$port" --admin "127.0.0.1:$admin" --pid "$dn_pid" \
        --attacks "$attack" "${example_args[@]}" || rc=$?
    [[ $rc -eq 2 ]] && exit 2
    [[ $rc -ne 0 ]] && status=1
    if ! kill -0 "$dn_pid" 2>/dev/null; then
        echo "dn-sim died during $attack" >&2
        status=1
    fi
    stop_dn_sim
done
exit $status
