#!/usr/bin/env bash
# The differential conformance suite: every scenario of conformance/scenarios/ against a real Apache
# Ozone DataNode (scripts/real-datanode.sh) and against dn-sim, answers compared field by field.
# Prints a markdown table and a last line `N identical, M declared, K differ`; exits 1 when K > 0.
#
# Usage: scripts/conformance.sh [--ozone-version 2.0.0|2.1.0|2.2.0] [conformance flags]...
#   e.g. scripts/conformance.sh --only '^echo' --json /tmp/answers.json
# Exit 3 (and one line on stderr) when the real DataNode's jars cannot be had: Maven Central out of
# reach, or a release (2.0.0, 2.1.0) that Maven Central does not serve and that was not built locally.
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

for tool in java mvn; do
    command -v "$tool" >/dev/null || { echo "conformance.sh: $tool not found (the real DataNode needs Java 17 and Maven)" >&2; exit 3; }
done
# Fetch and build the harness first, so that a registry out of reach is told apart from a failure.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! interop/ozone/setup.sh --ozone-version "$version" >"$log" 2>&1; then
    # Out of reach, or broken? Ask the registry for one small POM.
    if ! mvn -q -B dependency:get -Dartifact=org.apache.ozone:hdds-config:2.2.0:pom -Dtransitive=false >/dev/null 2>&1; then
        echo "conformance.sh: Maven Central is out of reach, so no real DataNode: $(grep -m1 -E 'ERROR|error' "$log" | cut -c1-200)" >&2
        exit 3
    fi
    tail -20 "$log" >&2
    if grep -q 'not built locally' "$log"; then
        exit 3
    fi
    echo "conformance.sh: interop/ozone/setup.sh failed for Ozone $version (above)" >&2
    exit 1
fi

cargo build -q --locked -p dn-sim -p conformance
exec target/debug/conformance \
    --ozone-version "${version%.*}" \
    --real-cmd "scripts/real-datanode.sh --ozone-version $version" \
    --sim-cmd target/debug/dn-sim \
    "${args[@]}"
