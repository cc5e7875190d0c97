#!/usr/bin/env bash
# The project's one test command (README, .ci/run): named stages, fast first (formatting, lints
# with warnings denied, every unit and integration test), then the end-to-end checks. Every stage
# runs, whatever failed before it (except those that need a build that failed); each is timed and
# ends passed, failed or skipped. A stage may skip only with exit 3, which its script gives only
# when a probe finds a package registry (Maven Central, Debian's archive, PyPI) out of reach; with
# CI=true (as .ci/run sets) nothing may skip, and a skip counts as a failure. At the end: a table
# of every stage, its result and seconds, the line `N passed, N failed, N skipped` (stages), and
# exit 1 if any stage failed. It installs what the tests need on a fresh machine by itself.
#
# Usage: scripts/test.sh [--only REGEX]   (run only the stages whose names match; for one stage)
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
mkdir -p target

only=""
[ "${1:-}" = --only ] && only="${2:?--only needs a regex}"
ci=false
[ "${CI:-}" = true ] && ci=true
# A CI machine builds everything once: cargo's incremental caches (1.6 GB of a debug target)
# would only cost disk, and its free disk is not known in advance (a run has run out of it).
$ci && export CARGO_INCREMENTAL=0

# free_gb: the disk space left where the checkout lives, in whole GB (shown per stage: a stage
# that fails for want of disk says so in the summary).
free_gb() { df -BG --output=avail . 2>/dev/null | tail -1 | tr -dc 0-9; }

names=() results=() times=() frees=()
# stage NAME [--needs STAGE] -- COMMAND...: runs COMMAND, records NAME's result and seconds.
# Exit 0: passed; 3: skipped (the command printed why, its last line is the reason), a failure
# under CI=true; anything else: failed. With --needs, a stage that did not pass before means
# "skipped because STAGE failed", which counts as a failure: nothing was checked.
stage() {
    local name=$1 needs="" status=0 start result log
    shift
    if [ "$1" = --needs ]; then needs=$2; shift 2; fi
    [ "$1" = -- ] && shift
    # (--only keeps the build: the end-to-end stages need it.)
    if [ -n "$only" ] && [ "$name" != build ] && ! [[ "$name" =~ $only ]]; then return 0; fi
    names+=("$name")
    echo
    echo "== $name: $*"
    if [ -n "$needs" ] && [ "$(stage_result "$needs")" != passed ]; then
        results+=("failed (not run: needs $needs, which did not pass)")
        times+=(0)
        frees+=("$(free_gb)")
        echo "!!! $name not run: it needs $needs, which did not pass"
        return 0
    fi
    log="target/stage-$name.log"
    start=$SECONDS
    "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    times+=($((SECONDS - start)))
    frees+=("$(free_gb)")
    case "$status" in
        0) result=passed ;;
        3) local why
           why=$(grep -v '^\s*$' "$log" | tail -1 | cut -c1-160)
           if $ci; then
               result="failed (CI=true: skipped not allowed: $why)"
           else
               result="skipped because $why"
           fi ;;
        *) result="failed (exit $status)" ;;
    esac
    results+=("$result")
    echo "== $name: $result ($((SECONDS - start)) s)"
}
stage_result() {
    local i
    for i in "${!names[@]}"; do
        [ "${names[$i]}" = "$1" ] && { echo "${results[$i]:-}"; return; }
    done
    echo "not run"
}

# The stages' commands, where they are more than one line.
build() { cargo build -q --locked -p dn-sim -p loadgen -p conformance; }
unit_and_integration_tests() {
    if cargo nextest --version >/dev/null 2>&1; then
        cargo nextest run --workspace --locked --no-fail-fast
    else
        cargo test --workspace --locked --no-fail-fast
    fi
}
experiments_quick() {
    LOADGEN=target/debug/loadgen scripts/exp-handlers.sh --quick &&
        LOADGEN=target/debug/loadgen scripts/exp-echo-payload.sh --quick
}
exp_checksum_quick() {
    # Its tables go to a file: only the verdict lines to the console.
    scripts/exp-checksum.sh --quick >target/exp-checksum-quick.md
}
conformance() {
    local status=0
    scripts/conformance.sh --ozone-version 2.2.0 --json target/conformance-2.2.0.json \
        >target/conformance-2.2.0.md 2>target/conformance-2.2.0.log || status=$?
    case "$status" in
        0) tail -1 target/conformance-2.2.0.md ;;
        3) tail -1 target/conformance-2.2.0.log ;;
        *) cat target/conformance-2.2.0.md; tail -30 target/conformance-2.2.0.log
           echo "conformance: dn-sim differs from the real DataNode, or the suite did not run (exit $status; target/conformance-2.2.0.md)" ;;
    esac
    return "$status"
}
java_client_check() {
    local status=0
    scripts/java-client-check.sh >target/java-client-check.log 2>&1 || status=$?
    case "$status" in
        0) grep -E '^[0-9]+ passed, [0-9]+ failed$' target/java-client-check.log ;;
        3) tail -1 target/java-client-check.log ;;
        *) cat target/java-client-check.log ;;
    esac
    return "$status"
}
bench_vs_freon_short() {
    # gRPC (HDDS-10442's dn-echo), then the Ratis port (HDDS-11224's `--ratis`, Raft writes).
    local status=0 mode out
    for mode in grpc ratis; do
        out=target/bench-vs-freon-$mode
        local flags=()
        [ "$mode" = ratis ] && flags=(--ratis)
        local s=0
        LOADGEN=target/debug/loadgen scripts/bench-vs-freon.sh -n 3000 -t 8 --clients 2 --rounds 1 \
            "${flags[@]}" >"$out.md" 2>"$out.log" || s=$?
        echo "-- $mode"
        case "$s" in
            0) grep -E '^\| (median|loadgen ÷ freon)' "$out.md" ;;
            3) tail -1 "$out.log" ;;
            *) cat "$out.md"; tail -30 "$out.log" ;;
        esac
        # A failure outranks a skip (3), which outranks success.
        if [ "$s" != 0 ] && { [ "$status" = 0 ] || [ "$s" != 3 ]; }; then status=$s; fi
    done
    return "$status"
}

stage fmt -- cargo fmt --all --check
stage clippy -- cargo clippy --workspace --all-targets --locked -- -D warnings
stage tests -- unit_and_integration_tests
stage build -- build
stage no-server -- scripts/check-no-server.sh
stage prometheus --needs build -- scripts/test-prometheus.sh
stage experiments-quick --needs build -- experiments_quick
stage check-deploy --needs build -- scripts/check-deploy.sh
stage check-helm -- scripts/check-helm.sh
stage shards-local --needs build -- env LOADGEN=target/debug/loadgen DN_SIM=target/debug/dn-sim scripts/shards-local.sh 4
stage compose-smoke --needs build -- scripts/compose-smoke.sh
stage exp-checksum-quick --needs build -- exp_checksum_quick
stage exp-throttling-quick --needs build -- scripts/exp-throttling.sh --quick
stage exp-throttling-write-quick --needs build -- env WORKLOAD=write NAME=exp-throttling-write scripts/exp-throttling.sh --quick
stage conformance --needs build -- conformance
stage scm-cluster --needs build -- env DN_SIM=target/debug/dn-sim scripts/scm-cluster-check.sh
stage cluster --needs build -- env DN_SIM=target/debug/dn-sim scripts/cluster-check.sh
stage mixed-cluster --needs build -- env DN_SIM=target/debug/dn-sim scripts/cluster-check.sh --mixed --keys 10
stage real-datanode-smoke --needs build -- env LOADGEN=target/debug/loadgen scripts/real-datanode-smoke.sh
stage twin-quick --needs build -- env LOADGEN=target/debug/loadgen DN_SIM=target/debug/dn-sim scripts/exp-twin.sh --quick
stage real-starts-quick --needs build -- env LOADGEN=target/debug/loadgen scripts/exp-real-starts.sh --quick
stage java-client-check --needs build -- java_client_check
stage bench-vs-freon-short --needs build -- bench_vs_freon_short
stage exp-ratis-executors-quick --needs build -- env LOADGEN=target/debug/loadgen DN_SIM=target/debug/dn-sim scripts/exp-ratis-executors.sh --quick
stage abuse-quick --needs build -- env PROFILE=debug scripts/abuse.sh --quick
stage fuzz-15s -- scripts/fuzz.sh --seconds 15

# Why each failed stage failed, where a reader of only the run's last lines sees it: the end of
# its log (the whole log is target/stage-NAME.log).
for i in "${!names[@]}"; do
    case "${results[$i]}" in
        passed | skipped*) ;;
        *) echo
           echo "== ${names[$i]} failed; the last lines of target/stage-${names[$i]}.log:"
           [ -f "target/stage-${names[$i]}.log" ] &&
               grep -v '^\s*$' "target/stage-${names[$i]}.log" | tail -25 | cut -c1-300 ;;
    esac
done

echo
echo "== summary$($ci && echo ' (CI=true: a skip is a failure)')"
passed=0 failed=0 skipped=0
echo "(free GB: the disk space left after the stage; $(free_gb) GB now)"
printf '%-28s %6s %7s  %s\n' stage seconds "free GB" result
for i in "${!names[@]}"; do
    printf '%-28s %6s %7s  %s\n' "${names[$i]}" "${times[$i]}" "${frees[$i]}" "${results[$i]}"
    case "${results[$i]}" in
        passed) passed=$((passed + 1)) ;;
        skipped*) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)) ;;
    esac
done
# The test runner's own closing line (CI reads it), from the tests stage's log.
if [ -f target/stage-tests.log ] && [ "$(stage_result tests)" != "not run" ]; then
    if grep -qE '^\s*Summary \[' target/stage-tests.log; then
        echo "tests stage (nextest): $(grep -E '^\s*Summary \[' target/stage-tests.log | tail -1 | sed 's/^ *//')"
    else
        # cargo test prints one `test result:` line per test binary: their sum.
        awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } n++ }
             END { printf "tests stage (cargo test): %d tests passed, %d failed, in %d test binaries\n", p, f, n }' target/stage-tests.log
    fi
fi
echo "stages: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
