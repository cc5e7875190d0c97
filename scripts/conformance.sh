#!/usr/bin/env bash
# The differential conformance suite: every scenario of conformance/scenarios/ against a real Apache
# Ozone DataNode (scripts/real-datanode.sh) and against dn-sim, answers compared field by field.
# Prints a markdown table and a last line `N identical, M declared, K differ`; exits 1 when K > 0.
#
# Usage: scripts/conformance.sh [--ozone-version 2.0.0|2.1.0|2.2.0] [conformance flags]...
#   e.g. scripts/conformance.sh --only '^echo' --json /tmp/answers.json
# Exit 3 (and one line on stderr) when the real DataNode's jars cannot be had: Maven Central out of
# reach (a probe), or a release (2.0.0, 2.1.0) that Maven Central does not serve and that was not
# built locally. A harness that does not build with Maven Central in reach exits 1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
version=2.2.0
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --ozone-version) version="${2:?--ozone-version needs a value}"; shift 2 ;;
        --ozone-version=*) version="${1#*=}"; shift ;;
        *) args+=("$1"); shift ;;
    esac
done
case "$version" in
    2.0.0|2.1.0|2.2.0) ;;
    *) echo "conformance.sh: --ozone-version must be 2.0.0, 2.1.0 or 2.2.0, not '$version'" >&2; exit 2 ;;
esac

# Fetch and build the harness first, so that a registry out of reach is told apart from a failure
# (scripts/lib.sh harness_setup: 3 only when the probe finds Maven Central out of reach).
. scripts/lib.sh
harness_setup conformance.sh "$version" || exit $?

# The free disk, for a reader of a failed run's log (the harness's volumes report a fixed size,
# LabSpaceUsage, so the ~300 containers' reservations do not need it; their data does, a little).
free_kb=$(df -Pk "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR == 2 {print $4}')
[[ "$free_kb" =~ ^[0-9]+$ ]] && echo "conformance.sh: $((free_kb / 1024 / 1024)) GB free under ${TMPDIR:-/tmp}" >&2

cargo build -q --locked -p dn-sim -p conformance
exec target/debug/conformance \
    --ozone-version "${version%.*}" \
    --real-cmd "scripts/real-datanode.sh --ozone-version $version" \
    --sim-cmd target/debug/dn-sim \
    "${args[@]}"
