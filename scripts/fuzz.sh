#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ (outside the workspace) for a while each, from a fresh
# machine: installs cargo-fuzz when missing (into cargo's bin directory), builds every target
# once with libFuzzer's instrumentation on the stable compiler (RUSTC_BOOTSTRAP=1: cargo-fuzz
# passes nightly-only flags), then fuzzes each target for --seconds, starting from its committed
# seeds (fuzz/corpus/TARGET, read only) plus what earlier runs found (fuzz/work/TARGET, not
# committed). Prints per target the executions, exec/s, coverage (libFuzzer's final `cov:` and
# `ft:`), corpus size and peak RSS; exits 1 if any target crashed, leaked a hang or ran out of
# memory (the reproducer is under fuzz/artifacts/TARGET/; replay it with
# `RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none -a TARGET FILE`).
#
#   scripts/fuzz.sh [--seconds N] [--target NAME]... [--sanitizer none|address] [--fresh]
#                   [-- LIBFUZZER_ARGS...]
#
# --seconds N   per target (default 20)          --target NAME  only this one (repeatable)
# --sanitizer   none (default: fast; Rust's own checks, debug assertions and overflow checks on)
#               or address (ASan, slower)
# --fresh       forget fuzz/work/ first: start from the committed seeds only
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=20
targets=()
sanitizer=none
fresh=0
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --seconds=*) seconds="${1#*=}"; shift ;;
        --target) targets+=("$2"); shift 2 ;;
        --target=*) targets+=("${1#*=}"); shift ;;
        --sanitizer) sanitizer="$2"; shift 2 ;;
        --sanitizer=*) sanitizer="${1#*=}"; shift ;;
        --fresh) fresh=1; shift ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: --seconds takes a whole number" >&2; exit 2 ;; esac
all=(decode_request store_sequence http2_client_frames ratis_message hrpc_response)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
    case " ${all[*]} " in *" $t "*) ;; *) echo "fuzz.sh: no target '$t' (${all[*]})" >&2; exit 2 ;; esac
done

export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz (cargo install cargo-fuzz --locked)"
    cargo install cargo-fuzz --locked
fi
# cargo-fuzz needs nightly flags (-Zsanitizer, -Cpasses=sancov-module, ...): the stable
# compiler accepts them with RUSTC_BOOTSTRAP=1. A nightly toolchain, if that is what runs, works too.
export RUSTC_BOOTSTRAP=1
flags=(--sanitizer "$sanitizer" --debug-assertions)

echo "== building the fuzz targets (${targets[*]}; sanitizer $sanitizer)"
start=$(date +%s)
for t in "${targets[@]}"; do
    cargo fuzz build "${flags[@]}" "$t"
done
echo "built in $(( $(date +%s) - start )) s"

[ "$fresh" = 0 ] || rm -rf fuzz/work
# libFuzzer's final `stat::NAME: VALUE` line (-print_final_stats=1).
stat_of() { (grep -o "stat::$1: *[0-9]*" "$2" | grep -o '[0-9]*$' | tail -1) || true; }

failed=()
summary=()
for t in "${targets[@]}"; do
    work="fuzz/work/$t"
    mkdir -p "$work" "fuzz/artifacts/$t" "fuzz/corpus/$t"
    log="fuzz/work/$t.log"
    echo "== fuzzing $t for ${seconds} s (seeds fuzz/corpus/$t, working corpus $work, log $log)"
    status=0
    # -timeout: one input running over 10 s is a hang. -rss_limit_mb: memory must stay bounded.
    # -max_len: the hostile-server streams and request sequences need no more.
    cargo fuzz run "${flags[@]}" "$t" "$work" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 -close_fd_mask=1 ${extra[@]+"${extra[@]}"} >"$log" 2>&1 || status=$?
    execs=$(stat_of number_of_executed_units "$log")
    rate=$(stat_of average_exec_per_sec "$log")
    rss=$(stat_of peak_rss_mb "$log")
    last=$( (grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -1) || true)
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
    ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
    corp=$(sed -nE 's/.* corp: ([0-9]+\/[0-9]+[a-zA-Z]*).*/\1/p' <<<"$last")
    line="$t: ${execs:-?} executions in ${seconds} s (${rate:-?}/s), cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, peak RSS ${rss:-?} MB"
    if [ "$status" != 0 ]; then
        line="$line — FAILED (exit $status)"
        failed+=("$t")
        grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written to|deadly signal|timeout|out-of-memory' "$log" | head -8 || true
        tail -25 "$log"
    fi
    echo "$line"
    summary+=("$line")
done

echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]} (reproducers in fuzz/artifacts/; logs in fuzz/work/)"
    exit 1
fi
