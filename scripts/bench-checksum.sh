#!/usr/bin/env bash
# CRC32 / CRC32C throughput: common::checksum (Rust, crc32fast + crc32c) against Java 17's
# java.util.zip.CRC32 / CRC32C (what Ozone's Checksum.java uses), measured in the same run.
#
# Both sides compute one checksum per 16 KiB window over the same pseudo-random 4 MiB buffer for
# about 1.5 s per algorithm (Java after a 2 s JIT warm-up) and print the last window's checksum,
# which must agree. Prints a markdown table; GB/s = 10^9 bytes/s. Goals: CRC32 >= 2x Java,
# CRC32C >= 1.1x Java.
#
# Usage: scripts/bench-checksum.sh [--seconds S] [--rounds N] [--buffer-kib N]
#   --seconds S     measuring time per algorithm and side (default 1.5)
#   --rounds N      run both sides N times, alternating, and keep each one's best figure
#                   (default 1); helps on a busy machine
#   --buffer-kib N  buffer size (default 4096 = 4 MiB, Ozone's chunk size; a buffer that fits in
#                   L2, e.g. 256, measures the CRC code instead of cache/memory bandwidth)
# Environment: JAVA (default: java on PATH), CARGO_BUILD_JOBS (default 1).
# Each figure is also given per second of the measuring thread's CPU time, which other load on
# the machine disturbs less than wall-clock time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

measure_seconds=1.5
rounds=1
buffer_kib=4096
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) measure_seconds="${2:?--seconds needs a value}"; shift 2 ;;
        --rounds) rounds="${2:?--rounds needs a value}"; shift 2 ;;
        --buffer-kib) buffer_kib="${2:?--buffer-kib needs a value}"; shift 2 ;;
        -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
done
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ && "$buffer_kib" =~ ^[1-9][0-9]*$ ]]; then
    echo "--rounds and --buffer-kib must be positive integers" >&2
    exit 2
fi

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
java_cmd="${JAVA:-java}"

echo "Building common/examples/checksum_bench.rs (release)..." >&2
cargo build --release --quiet -p common --example checksum_bench
rust_bench="${CARGO_TARGET_DIR:-target}/release/examples/checksum_bench"

have_java=false
java_label="Java 17"
if command -v "$java_cmd" >/dev/null 2>&1; then
    have_java=true
    java_version="$("$java_cmd" -version 2>&1 | head -n 1)"
    java_major="$(sed -E 's/.*version "(1\.)?([0-9]+).*/\2/' <<<"$java_version")"
    java_label="Java $java_major"
    echo "Java: $java_version ($(command -v "$java_cmd"))"
    if [[ "$java_major" =~ ^[0-9]+$ ]] && ((java_major < 11)); then
        echo "Java $java_major cannot run a .java file directly (needs 11+); the Java column is skipped."
        have_java=false
    fi
else
    echo "NOTE: java not found ('$java_cmd'; set JAVA=/path/to/java): the Java column is skipped," \
        "only the Rust side was measured."
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //' || echo unknown)," \
    "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
echo

results="$(mktemp)"
trap 'rm -f "$results"' EXIT
for ((round = 1; round <= rounds; round++)); do
    ((rounds > 1)) && echo "--- round $round of $rounds"
    bench_args=(--seconds "$measure_seconds" --buffer-kib "$buffer_kib" --window-kib 16)
    "$rust_bench" "${bench_args[@]}" | tee -a "$results"
    if $have_java; then
        "$java_cmd" scripts/java/ChecksumBench.java "${bench_args[@]}" | tee -a "$results"
    fi
done
echo

# Best GB/s per (impl, algo) over the rounds, wall-clock and per CPU-second; last-window checksums;
# then the tables.
awk -v have_java="$have_java" -v java_label="$java_label" -v rounds="$rounds" -v kib="$buffer_kib" '
    function keep(table, key, v) {
        if (v == "n/a" || v == "") return
        if (!(key in table) || v + 0 > table[key]) table[key] = v + 0
    }
    function show(table, key) { return (key in table) ? sprintf("%.2f", table[key]) : "n/a" }
    function print_table(title, table,    a, algo, r, j, ratio, met) {
        printf "%s\n\n", title
        printf "| algorithm | loadgen/common (Rust crate) GB/s | %s GB/s | ratio | goal |\n", java_label
        printf "|---|---|---|---|---|\n"
        for (a = 1; a <= n; a++) {
            algo = algos[a]
            r = "rust-common" SUBSEP algo
            j = "java" SUBSEP algo
            if (have_java == "true" && (r in table) && (j in table) && table[j] > 0) {
                ratio = table[r] / table[j]
                met = (ratio >= goal[algo]) ? "met" : "NOT met"
                printf "| %s | %.2f | %.2f | %.2fx | >= %.1fx Java: %s |\n", algo, table[r], table[j], ratio, goal[algo], met
            } else {
                printf "| %s | %s | %s | n/a | >= %.1fx Java: not measured |\n", algo, show(table, r),
                    (have_java == "true" ? show(table, j) : "n/a (no java)"), goal[algo]
            }
        }
        printf "\n"
    }
    /^RESULT / {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        key = f["impl"] SUBSEP f["algo"]
        keep(wall, key, f["gbps"])
        keep(cpu, key, f["cpu_gbps"])
        if ((key in last) && last[key] != f["last"]) mixed[key] = 1
        last[key] = f["last"]
    }
    END {
        goal["CRC32"] = 2.0; goal["CRC32C"] = 1.1
        n = split("CRC32 CRC32C", algos, " ")
        setup = sprintf("16 KiB windows over a %d KiB buffer, GB/s = 10^9 bytes/s%s", kib,
            (rounds > 1 ? ", best of " rounds " rounds" : ""))
        print_table("Checksum throughput per wall-clock second (" setup ")", wall)
        print_table("Per second of the measuring thread'"'"'s CPU time (" setup ")", cpu)
        printf "Bare crate calls (crc32fast::hash / crc32c::crc32c per window), wall-clock: CRC32 %s GB/s, CRC32C %s GB/s\n",
            show(wall, "rust-crate" SUBSEP "CRC32"), show(wall, "rust-crate" SUBSEP "CRC32C")
        status = 0
        printf "Last-window checksums:"
        for (a = 1; a <= n; a++) {
            algo = algos[a]
            rl = last["rust-common" SUBSEP algo]
            printf " %s rust %s", algo, rl
            if (have_java == "true") {
                jl = last["java" SUBSEP algo]
                agree = (rl == jl && !(("rust-common" SUBSEP algo) in mixed) && !(("java" SUBSEP algo) in mixed))
                printf " java %s (%s);", jl, agree ? "agree" : "DISAGREE"
                if (!agree) status = 1
            } else {
                printf ";"
            }
        }
        printf "\n"
        exit status
    }
' "$results"
