#!/usr/bin/env bash
# HDDS-15612's experiment with loadgen: CRC32 computed when a
# chunk is sent ("at-flush", Ozone before the patch) versus while each application write() is
# copied into the chunk buffer ("incremental", the patch), per cell of write size × writers ×
# transport (× simulated DataNode WriteChunk latency for the real transport), with repeated runs.
#
# Transports:
# - null: `loadgen write --target null`, dn-sim's dispatcher answering in loadgen's own process,
#   no socket, no HTTP/2 (the analogue of the patch's JMH benchmark with mocked RPCs);
# - real: loadgen's HTTP/2 client against a dn-sim process on the same machine
#   (`--store discard`: lengths and checksums kept, bytes dropped); a latency L > 0 adds
#   `--delay write_chunk=Lms` (to every WriteChunk, not to PutBlock). The null transport has no
#   delay model, so its cells are at 0 ms only.
#
# Each writer is one output stream on an OS thread and connection of its own (`-t W --clients W
# --runtime-threads W`), as each JMH thread was one BlockOutputStream. Every cell runs --repeats
# pairs, interleaved: at-flush then incremental, then incremental then at-flush, and so on. Per
# cell: the median MB/s of each mode (app-write bytes per second from the JSON report, MB = 2^20
# bytes), the median of the paired differences (incremental − at-flush) / at-flush in %, their
# mean with a 95 % Student t confidence interval over the paired differences, and whether that
# interval excludes 0. Markdown table to stdout and results/exp-checksum.md, every run to
# results/exp-checksum.csv.
#
#   scripts/exp-checksum.sh [--quick] [--seconds 1] [--sizes "64KB 1MB 4MB"]
#                           [--threads "1 2 … 3×nproc"] [--latencies "0"] [--repeats 5]
#                           [--transports "null real"]
# --quick: 2 sizes × 1 and 2 writers × both transports, 2 repeats of 0.3 s, with the debug build
# the test command has already built, output under target/exp-quick/ (about 30 s; a smoke test
# for CI: its numbers mean nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

cores=$(nproc)
sizes="64KB 1MB 4MB"
threads=$(seq -s ' ' 1 $((3 * cores)))
latencies="0"
seconds=1
repeats=5
transports="null real"
quick=0
profile=release
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1; sizes="64KB 1MB"; threads="1 2"; seconds=0.3; repeats=2; profile=debug; shift ;;
        --seconds) seconds=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --latencies) latencies=$2; shift 2 ;;
        --repeats) repeats=$2; shift 2 ;;
        --transports) transports=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
for tr in $transports; do
    case $tr in null | real) ;; *) echo "--transports: '$tr' is not null or real" >&2; exit 2 ;; esac
done
case $repeats in '' | *[!0-9]* | 0 | 1) echo "--repeats: at least 2 (pairs give a confidence interval)" >&2; exit 2 ;; esac

if [ "$profile" = release ]; then
    cargo build -q --release -p dn-sim -p loadgen
else
    cargo build -q -p dn-sim -p loadgen
fi
out_dir=results
# --quick writes under target/, so the committed full-run results are never overwritten.
[ "$quick" = 1 ] && out_dir=target/exp-quick
mkdir -p "$out_dir"
csv=$out_dir/exp-checksum.csv
md=$out_dir/exp-checksum.md
work=$(mktemp -d)
# A copy of the binaries: another build in the shared target/ must not swap them mid-experiment.
BIN=$work/bin
mkdir -p "$BIN"
cp "target/$profile/loadgen" "target/$profile/dn-sim" "$BIN/"
sim=""
cleanup() {
    if [ -n "$sim" ]; then kill "$sim" 2>/dev/null || true; wait "$sim" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

start_sim() { # $1: WriteChunk delay in ms
    local delay=()
    [ "$1" != 0 ] && delay=(--delay "write_chunk=${1}ms")
    # Port 0 and the address dn-sim writes to its ready file: no port is guessed.
    rm -f "$work/dn-sim.ready"
    "$BIN/dn-sim" --listen 127.0.0.1:0 --metrics-listen none --store discard \
        --ready-file "$work/dn-sim.ready" "${delay[@]}" 2>"$work/dn-sim.log" &
    sim=$!
    if wait_ready_file "$work/dn-sim.ready" "$sim"; then
        port=${ready_client##*:}
        return 0
    fi
    echo "dn-sim did not start:" >&2
    cat "$work/dn-sim.log" >&2
    exit 1
}

stop_sim() {
    kill "$sim" 2>/dev/null || true
    wait "$sim" 2>/dev/null || true
    sim=""
}

run_one() { # $1 transport, $2 size, $3 writers, $4 mode → "target|MB/s writes/s WC-ms PB-ms cpu-s"
    local out="$work/run.json" target=null
    [ "$1" = real ] && target="127.0.0.1:$port"
    if ! "$BIN/loadgen" write --target "$target" --duration "${seconds}s" -t "$3" --clients "$3" \
        --runtime-threads "$3" --write-size "$2" --checksum CRC32 --checksum-mode "$4" \
        --format json >"$out" 2>"$work/err"; then
        echo "loadgen write failed ($1, $2, $3 writers, $4):" >&2
        cat "$work/err" "$out" >&2
        exit 1
    fi
    python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["totals"]["failures"] == 0, r["errors"]
w, ops = r["write"], r["ops"]
cpu = r["generator"].get("cpu_s") or 0.0
print(f'{r["config"]["target"]}|{w["mb_per_s"]:.1f} {w["writes_per_s"]:.1f} '
      f'{ops["WriteChunk"]["mean_ms"]:.3f} {ops["PutBlock"]["mean_ms"]:.3f} {cpu:.3f}')
PY
}

echo "transport,target,write_size,writers,dn_write_latency_ms,checksum,checksum_mode,repeat,position,seconds,mb_per_s,writes_per_s,write_chunk_mean_ms,put_block_mean_ms,loadgen_cpu_s" >"$csv"
started=$SECONDS
for lat in $latencies; do
    [[ " $transports " == *" real "* ]] && start_sim "$lat"
    for size in $sizes; do
        for t in $threads; do
            for tr in $transports; do
                if [ "$tr" = null ] && [ "$lat" != 0 ]; then continue; fi
                for r in $(seq "$repeats"); do
                    if [ $((r % 2)) -eq 1 ]; then order="at-flush incremental"; else order="incremental at-flush"; fi
                    pos=0
                    for mode in $order; do
                        pos=$((pos + 1))
                        IFS='|' read -r tdesc vals < <(run_one "$tr" "$size" "$t" "$mode")
                        read -r mbs wps wc pb cpu <<<"$vals"
                        echo "$tr,\"$tdesc\",$size,$t,$lat,CRC32,$mode,$r,$pos,$seconds,$mbs,$wps,$wc,$pb,$cpu" >>"$csv"
                        echo "  [$((SECONDS - started)) s] $tr $size × $t writer(s), $lat ms, repeat $r, $mode: $mbs MB/s" >&2
                    done
                done
            done
        done
    done
    [ -n "$sim" ] && stop_sim
done

python3 - "$csv" "$cores" "$seconds" "$(uname -m)" "$profile" "$repeats" >"$md" <<'PY'
import csv, math, statistics, sys
path, cores, seconds, arch, profile, repeats = sys.argv[1:7]
cores = int(cores)
# Two-sided 95 % Student t quantiles t(0.975, df).
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
        17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000}
def t975(df):
    return T975.get(df) or T975[max(k for k in T975 if k <= df)]

cells, order = {}, []
for row in csv.DictReader(open(path)):
    key = (row["transport"], row["write_size"], int(row["writers"]), row["dn_write_latency_ms"])
    if key not in cells:
        cells[key] = {"target": row["target"], "runs": {}}
        order.append(key)
    cells[key]["runs"].setdefault(int(row["repeat"]), {})[row["checksum_mode"]] = float(row["mb_per_s"])

names = {"null": "null (in-process, no network)", "real": "real (HTTP/2 to dn-sim)"}
print("| transport | write size | writers | × cores | DN write latency (ms) | at-flush median (MB/s) "
      "| incremental median (MB/s) | median difference (%) | mean difference (%) | 95 % CI (%) | significant |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
sig_cells = []
for key in order:
    tr, size, w, lat = key
    pairs = [p for p in cells[key]["runs"].values() if "at-flush" in p and "incremental" in p]
    a = [p["at-flush"] for p in pairs]
    i = [p["incremental"] for p in pairs]
    d = [(p["incremental"] - p["at-flush"]) / p["at-flush"] * 100 for p in pairs if p["at-flush"] > 0]
    n = len(d)
    mean = statistics.fmean(d)
    half = t975(n - 1) * statistics.stdev(d) / math.sqrt(n) if n > 1 else float("inf")
    lo, hi = mean - half, mean + half
    sig = "yes" if lo > 0 or hi < 0 else "no"
    if sig == "yes":
        sig_cells.append(f"{tr} {size} {w}w {'+' if mean > 0 else '−'}")
    print(f"| {names[tr]} | {size} | {w} | {w / cores:.1f} | {lat} | {statistics.median(a):,.1f} | "
          f"{statistics.median(i):,.1f} | {statistics.median(d):+.1f} | {mean:+.1f} | "
          f"[{lo:+.1f}, {hi:+.1f}] | {sig} ({n} pairs) |")
print()
print("Legend:")
print("- transport: null = `loadgen write --target null` (every report names it "
      "`null (in-process, no network)`): dn-sim's dispatcher and a discard store called in "
      "loadgen's process, no socket, no HTTP/2, no response encoding — the analogue of the "
      "patch's JMH benchmark with mocked RPCs; real = loadgen's HTTP/2 client to a dn-sim "
      "process (`--store discard`) on the same machine.")
print("- write size: bytes per application write() call; KB = 2^10 bytes, MB = 2^20 bytes (Ozone's units).")
print(f"- writers: concurrent output streams (`-t W --clients W --runtime-threads W`: one OS thread "
      f"and one connection each, as each JMH thread was one BlockOutputStream); × cores = writers / "
      f"{cores} cores.")
print("- DN write latency (ms): service time dn-sim adds to every WriteChunk (`--delay write_chunk=Lms`), real transport only.")
print("- at-flush / incremental median (MB/s): median over the repeats of each run's application "
      "bytes written per second (`write.mb_per_s` of the JSON report), MB = 2^20 bytes. at-flush: "
      "CRC32 over each 4 MB chunk when it is sent (Ozone before HDDS-15612); incremental: CRC32 of "
      "each write() while it is copied into the chunk buffer (HDDS-15612).")
print("- median / mean difference (%): of the paired differences (incremental − at-flush) / "
      "at-flush × 100, one per repeat; positive = incremental faster.")
print("- 95 % CI (%): Student t interval of the mean paired difference, mean ± t(0.975, n−1) × s / √n "
      "over the n pairs; significant = the interval excludes 0. With this many cells, about 1 in 20 "
      "is \"significant\" by chance alone.")
print(f"- chunk 4 MB, bytes per checksum 16 KB, block 256 MB, PutBlock every 16 MB; {repeats} pairs "
      f"of {seconds} s runs per cell, interleaved (at-flush first in odd repeats, incremental first "
      f"in even ones); {cores} cores ({arch}), {profile} build, machine shared with other work.")
print()
print(f"Significant cells: {len(sig_cells)} of {len(order)}" + (f" ({', '.join(sig_cells)})" if sig_cells else "") + ".")
PY
cat "$md"
echo "table: $md, runs: $csv" >&2
