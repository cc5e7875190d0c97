#!/usr/bin/env bash
# CRC32 / CRC32C throughput: common::checksum and every candidate Rust crate (crc32fast and crc-fast
# for CRC32, crc32c and crc-fast for CRC32C) against Java 17's java.util.zip.CRC32 / CRC32C (what
# Ozone's Checksum.java uses), measured in the same run, at each buffer size.
#
# Every side computes one checksum per 16 KiB window (Ozone's bytesPerChecksum default) over the
# same pseudo-random buffer for about 1.5 s per figure (Java after a 2 s JIT warm-up) and prints the
# last window's checksum; all of them must agree (the Rust side also compares every window of every
# candidate with common::checksum before measuring). Rounds are interleaved: each round runs, per
# buffer size, the Rust side then the Java sides; each figure is the median over the rounds (not
# the best: at 4 MiB a JVM's buffer sometimes lands where it runs ~15 % faster for the whole
# process, e.g. 27.9, 28.1 and 32.5 GB/s in three rounds, and the best would crown that). Prints one
# markdown table; GB/s = 10^9 bytes/s. Goal: >= 1.0x Java for both algorithms at every
# buffer size, judged like for like: the crate common::checksum uses (bare per-window calls) against
# the bare java.util.zip loop, and common::checksum itself (which also builds the ChecksumData: one
# Bytes per window) against the real Ozone client's Checksum.computeChecksum (which builds its
# ChecksumData: one ByteString per window; scripts/java/OzoneChecksumBench.java, run on the
# classpath of the interop/ozone harness, built here with interop/ozone/setup.sh when missing). The
# fastest crate per algorithm and buffer is marked. A reference row reads the buffer without a
# CRC (an XOR of its words): where the CRCs run as fast as that (4 MiB here: the buffer is not in
# the core's 2 MiB L2), the memory system sets the pace for every implementation, and ratios
# within about 2 % of 1.0 are a tie.
#
# Usage: scripts/bench-checksum.sh [--seconds S] [--rounds N] [--buffer-kib LIST] [--align A]
#                                  [--ozone-version V | --no-ozone]
#   --seconds S        measuring time per figure (default 1.5)
#   --rounds N         rounds, each measuring everything once (default 3; the machine is noisy)
#   --buffer-kib LIST  comma-separated buffer sizes in KiB (default 256,4096: 256 KiB fits in L2
#                      and measures the CRC code; 4 MiB, Ozone's chunk size, is closer to cache and
#                      memory bandwidth)
#   --align A          both sides' buffers start A bytes past a 64-byte boundary (default 16, what
#                      glibc's malloc gives a large buffer; Java then uses a direct ByteBuffer).
#                      The AVX-512 CRC code on both sides runs up to ~20 % faster at 0; a heap
#                      byte[] lands at a different alignment from run to run, hence the option
#   --ozone-version V  the Ozone release whose Checksum.computeChecksum is measured (default 2.2.0)
#   --no-ozone         skip the Ozone rows (no Maven needed); common::checksum is then judged
#                      against the bare Java loop
# Environment: JAVA (default: java on PATH), CARGO_BUILD_JOBS (default 1).
# Each figure is also given per second of the measuring thread's CPU time, which other load on
# the machine disturbs less than wall-clock time; "fastest crate" and the goal use that figure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

measure_seconds=1.5
rounds=3
buffer_list=256,4096
align=16
ozone_version=2.2.0
with_ozone=true
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) measure_seconds="${2:?--seconds needs a value}"; shift 2 ;;
        --rounds) rounds="${2:?--rounds needs a value}"; shift 2 ;;
        --buffer-kib) buffer_list="${2:?--buffer-kib needs a value}"; shift 2 ;;
        --align) align="${2:?--align needs a value}"; shift 2 ;;
        --ozone-version) ozone_version="${2:?--ozone-version needs a value}"; shift 2 ;;
        --no-ozone) with_ozone=false; shift ;;
        -h | --help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
done
IFS=, read -r -a buffers <<<"$buffer_list"
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]] || ((${#buffers[@]} == 0)); then
    echo "--rounds must be a positive integer and --buffer-kib a list of sizes" >&2
    exit 2
fi
if ! [[ "$align" =~ ^[0-9]+$ ]] || ((align > 63)); then
    echo "--align must be 0..63" >&2
    exit 2
fi
for kib in "${buffers[@]}"; do
    if ! [[ "$kib" =~ ^[1-9][0-9]*$ ]]; then
        echo "--buffer-kib: '$kib' is not a positive integer (KiB)" >&2
        exit 2
    fi
done

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
        echo "Java $java_major cannot run a .java file directly (needs 11+); the Java rows are skipped."
        have_java=false
    fi
else
    echo "NOTE: java not found ('$java_cmd'; set JAVA=/path/to/java): the Java rows are skipped," \
        "only the Rust side was measured."
fi
# The real Ozone client's Checksum class: the interop harness's classpath for that release.
ozone_classpath=""
ozone_label="Ozone $ozone_version"
if $with_ozone && $have_java; then
    cp_file="interop/ozone/target/classpath-$ozone_version.txt"
    if [[ ! -s "$cp_file" ]]; then
        echo "Building the interop/ozone harness for Ozone $ozone_version (its Checksum class)..." >&2
        interop/ozone/setup.sh --ozone-version "$ozone_version" >&2 || true
    fi
    if [[ -s "$cp_file" ]]; then
        ozone_classpath="$(cat "$cp_file")"
    else
        echo "NOTE: no classpath for Ozone $ozone_version (interop/ozone/setup.sh failed): the Ozone rows are" \
            "skipped and common::checksum is judged against the bare Java loop."
    fi
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //' || echo unknown)," \
    "$(nproc) cores, flags: $(grep -m1 -o -w -E 'pclmulqdq|sse4_2|avx2|avx512f|avx512vl|vpclmulqdq' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')" \
    "load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
echo

results="$(mktemp)"
trap 'rm -f "$results"' EXIT
for ((round = 1; round <= rounds; round++)); do
    ((rounds > 1)) && echo "--- round $round of $rounds"
    for kib in "${buffers[@]}"; do
        bench_args=(--seconds "$measure_seconds" --buffer-kib "$kib" --window-kib 16 --align "$align")
        "$rust_bench" "${bench_args[@]}" --round "$round" | tee -a "$results"
        if $have_java; then
            "$java_cmd" scripts/java/ChecksumBench.java "${bench_args[@]}" | tee -a "$results"
        fi
        if [[ -n "$ozone_classpath" ]]; then
            # Ozone's log4j/slf4j print binding notes on stderr; they are not results.
            "$java_cmd" -cp "$ozone_classpath" scripts/java/OzoneChecksumBench.java "${bench_args[@]}" \
                2> >(grep -v -E '^(SLF4J|log4j)' >&2) | tee -a "$results"
        fi
    done
done
echo

# Median GB/s per (algo, buffer, impl) over the rounds, wall-clock and per CPU-second; last-window
# checksums (all implementations of an algorithm and buffer must agree); then the table.
awk -v have_java="$have_java" -v java_label="$java_label" -v ozone_label="$ozone_label" -v rounds="$rounds" -v buffer_list="$buffer_list" \
    -v align="$align" '
    # The figure of every round ("wall" or "cpu"), then (in END) the median per key.
    function keep(name, key, v,    n) {
        if (v == "n/a" || v == "") return
        n = ++count[name SUBSEP key]
        samples[name SUBSEP key SUBSEP n] = v + 0
    }
    function median_of(name, key,    n, i, j, t, a) {
        n = count[name SUBSEP key]
        for (i = 1; i <= n; i++) a[i] = samples[name SUBSEP key SUBSEP i]
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function show(table, key) { return (key in table) ? sprintf("%.2f", table[key]) : "n/a" }
    function ratio(table, key, jkey) {
        return ((key in table) && (jkey in table) && table[jkey] > 0) ? sprintf("%.2fx", table[key] / table[jkey]) : "n/a"
    }
    function goal(key, jkey, against) {
        if (have_java != "true" || !(key in cpu) || !(jkey in cpu) || cpu[jkey] <= 0) return "goal >= 1.0x " against ": not measured"
        return sprintf("%.2fx %s: goal >= 1.0x %s", cpu[key] / cpu[jkey], against,
            (cpu[key] / cpu[jkey] >= 1.0) ? "met" : "NOT met")
    }
    function size(bytes) {
        return (bytes % 1048576 == 0) ? (bytes / 1048576 " MiB") : (bytes / 1024 " KiB")
    }
    /^RESULT / {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        key = f["algo"] SUBSEP f["buffer"] SUBSEP f["impl"]
        keep("wall", key, f["gbps"])
        keep("cpu", key, f["cpu_gbps"])
        keys[key] = 1
        uses[key] = f["uses"]
        if ((key in last) && last[key] != f["last"]) mixed[key] = 1
        last[key] = f["last"]
        group = f["algo"] SUBSEP f["buffer"]
        if (!(group in value)) value[group] = f["last"]
        else if (value[group] != f["last"]) disagree[group] = 1
    }
    END {
        for (key in keys) {
            if (("wall" SUBSEP key) in count) wall[key] = median_of("wall", key)
            if (("cpu" SUBSEP key) in count) cpu[key] = median_of("cpu", key)
        }
        n_algos = split("CRC32 CRC32C", algos, " ")
        crates["CRC32"] = "crc32fast crc-fast"
        crates["CRC32C"] = "crc32c crc-fast"
        n_buffers = split(buffer_list, kibs, ",")
        printf "Checksum throughput: 16 KiB windows, buffers %d bytes past a 64-byte boundary, GB/s = 10^9 bytes/s%s; ratios are to %s (java.util.zip)\n\n",
            align, (rounds > 1 ? ", median of " rounds " rounds" : ""), java_label
        printf "| algorithm | buffer | implementation | GB/s wall | GB/s per CPU-s | vs Java (wall) | vs Java (CPU-s) | result |\n"
        printf "|---|---|---|---|---|---|---|---|\n"
        status = 0
        for (a = 1; a <= n_algos; a++) {
            algo = algos[a]
            for (b = 1; b <= n_buffers; b++) {
                buffer = kibs[b] * 1024
                g = algo SUBSEP buffer
                j = g SUBSEP "java"
                # The fastest candidate crate per CPU-second (wall-clock if CPU time is missing).
                n_crates = split(crates[algo], names, " ")
                best = ""
                for (c = 1; c <= n_crates; c++) {
                    k = g SUBSEP names[c]
                    v = (k in cpu) ? cpu[k] : ((k in wall) ? wall[k] : -1)
                    if (v >= 0 && (best == "" || v > best_v)) { best = names[c]; best_v = v }
                }
                if (have_java == "true")
                    printf "| %s | %s | %s java.util.zip.%s | %s | %s | 1.00x | 1.00x | |\n", algo, size(buffer),
                        java_label, algo, show(wall, j), show(cpu, j)
                kc = g SUBSEP "common"
                for (c = 1; c <= n_crates; c++) {
                    k = g SUBSEP names[c]
                    note = (names[c] == best ? "fastest crate" : "")
                    if (names[c] == uses[kc])
                        note = note (note == "" ? "" : "; ") "in common: " goal(k, j, "the bare Java loop")
                    printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", algo, size(buffer), names[c],
                        show(wall, k), show(cpu, k), ratio(wall, k, j), ratio(cpu, k, j), note
                }
                kr = "READ" SUBSEP buffer SUBSEP "read"
                if (kr in wall)
                    printf "| %s | %s | reference: reading the buffer, no CRC (XOR of its words) | %s | %s | %s | %s | %s |\n", algo,
                        size(buffer), show(wall, kr), show(cpu, kr), ratio(wall, kr, j), ratio(cpu, kr, j),
                        ((j in cpu) && cpu[j] >= 0.97 * cpu[kr]) ? "Java runs at this pace: memory bound" : ""
                ko = g SUBSEP "ozone"
                if (ko in wall)
                    printf "| %s | %s | %s Checksum.computeChecksum (builds its ChecksumData) | %s | %s | %s | %s | |\n", algo,
                        size(buffer), ozone_label, show(wall, ko), show(cpu, ko), ratio(wall, ko, j), ratio(cpu, ko, j)
                # common::checksum builds a ChecksumData: judged against the Ozone client doing the
                # same, when that was measured.
                verdict = (ko in cpu) ? goal(kc, ko, ozone_label " computeChecksum") : goal(kc, j, "the bare Java loop")
                printf "| %s | %s | **common::checksum** (%s, builds its ChecksumData) | %s | %s | %s | %s | %s |\n", algo, size(buffer),
                    uses[kc], show(wall, kc), show(cpu, kc), ratio(wall, kc, j), ratio(cpu, kc, j), verdict
                if ((g in disagree)) status = 1
                for (key in mixed) if (index(key, g SUBSEP) == 1) status = 1
            }
        }
        printf "\nLast-window checksums:"
        for (a = 1; a <= n_algos; a++) {
            for (b = 1; b <= n_buffers; b++) {
                g = algos[a] SUBSEP (kibs[b] * 1024)
                bad = (g in disagree)
                for (key in mixed) if (index(key, g SUBSEP) == 1) bad = 1
                printf " %s %s %s (%s);", algos[a], size(kibs[b] * 1024), value[g],
                    bad ? "implementations DISAGREE" : "all implementations agree"
            }
        }
        printf "\n"
        exit status
    }
' "$results"
