#!/usr/bin/env bash
# The project's one test command (README, .ci/run): formatting, lints with warnings denied, and
# every test of the workspace. It installs what the tests need on a fresh machine by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== Prometheus end to end (installs Debian's prometheus when missing)"
cargo build -q --locked -p dn-sim -p loadgen
scripts/test-prometheus.sh

echo "== experiments, --quick: tables and charts (scripts/exp-handlers.sh, scripts/exp-echo-payload.sh)"
LOADGEN=target/debug/loadgen scripts/exp-handlers.sh --quick
LOADGEN=target/debug/loadgen scripts/exp-echo-payload.sh --quick

echo "== deploy/ statically: compose files (docker-compose 1.29, Compose spec), scrape config, Grafana dashboard"
scripts/check-deploy.sh

echo "== compose stack under Podman (installs Podman when missing; says so and goes on when it cannot)"
scripts/compose-smoke.sh

echo "== HDDS-15612 experiment, quick (loadgen write against dn-sim and --target null, about 40 s)"
scripts/exp-checksum.sh --quick >/dev/null

echo "== throttling experiment, quick (accounting only, no performance goals; < 1 minute each)"
scripts/exp-throttling.sh --quick
WORKLOAD=write NAME=exp-throttling-write scripts/exp-throttling.sh --quick

echo "== conformance: dn-sim against a real Apache Ozone 2.2.0 DataNode (scripts/conformance.sh; the first run downloads ~270 MB of jars)"
mkdir -p target
status=0
conformance_failed=0
scripts/conformance.sh --ozone-version 2.2.0 --json target/conformance-2.2.0.json >target/conformance-2.2.0.md 2>target/conformance-2.2.0.log || status=$?
case "$status" in
    0) tail -1 target/conformance-2.2.0.md ;;
    3) echo "!!! SKIPPED: the real-DataNode conformance checks did not run: $(tail -1 target/conformance-2.2.0.log) !!!" ;;
    *) cat target/conformance-2.2.0.md; tail -30 target/conformance-2.2.0.log
       echo "conformance: dn-sim differs from the real DataNode (exit $status; table above, target/conformance-2.2.0.md)"
       conformance_failed=1 ;;
esac

echo "== loadgen echo against a real Ozone 2.2.0 DataNode (scripts/real-datanode-smoke.sh)"
status=0
LOADGEN=target/debug/loadgen scripts/real-datanode-smoke.sh || status=$?
case "$status" in
    0) ;;
    3) echo "!!! SKIPPED: loadgen against a real DataNode: no real DataNode here (see the conformance line above) !!!" ;;
    *) exit 1 ;;
esac

echo "== Ozone 2.2.0's own Java client against dn-sim (scripts/java-client-check.sh)"
status=0
scripts/java-client-check.sh >target/java-client-check.log 2>&1 || status=$?
case "$status" in
    0) grep -E '^[0-9]+ passed, [0-9]+ failed$' target/java-client-check.log ;;
    3) echo "!!! SKIPPED: Ozone's Java client against dn-sim: $(tail -1 target/java-client-check.log) !!!" ;;
    *) cat target/java-client-check.log; exit 1 ;;
esac

echo "== the real freon dn-echo beside loadgen on a real Ozone 2.2.0 DataNode, short (scripts/bench-vs-freon.sh; a debug loadgen: numbers not judged here)"
status=0
LOADGEN=target/debug/loadgen scripts/bench-vs-freon.sh -n 3000 -t 8 --clients 2 --rounds 1 >target/bench-vs-freon.md 2>target/bench-vs-freon.log || status=$?
case "$status" in
    0) grep -E '^\| (median|loadgen ÷ freon)' target/bench-vs-freon.md ;;
    3) echo "!!! SKIPPED: freon beside loadgen: $(tail -1 target/bench-vs-freon.log) !!!" ;;
    *) cat target/bench-vs-freon.md; tail -30 target/bench-vs-freon.log; exit 1 ;;
esac

echo "== HTTP/2 and connection abuse, quick (scripts/abuse.sh --quick: 8 attacks beside an honest client, debug dn-sim, about 30 s)"
PROFILE=debug scripts/abuse.sh --quick

echo "== fuzzing, short (scripts/fuzz.sh: decode_request, store_sequence, http2_client_frames, 15 s each; installs cargo-fuzz when missing)"
scripts/fuzz.sh --seconds 15

echo "== tests"
tests_status=0
if cargo nextest --version >/dev/null 2>&1; then
    # Last, so that its summary closes the output (the crates have no doctests).
    cargo nextest run --workspace --locked --no-fail-fast || tests_status=$?
else
    cargo test --workspace --locked --no-fail-fast || tests_status=$?
fi
if [ "$conformance_failed" != 0 ]; then
    echo "FAILED: the conformance suite (see above, target/conformance-2.2.0.md)"
    exit 1
fi
exit "$tests_status"
