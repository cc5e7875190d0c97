#!/usr/bin/env bash
# Echo throughput of two commits, side by side in one run: has a change (a refactoring, a new
# layer) cost the hot path anything? Builds release loadgen and dn-sim of BASE and HEAD (default:
# the work tree's HEAD) in git worktrees under target/bench-commits/, then alternates them round
# by round (so drift of a shared, noisy machine hits both alike) in two cells:
#   per-request  loadgen echo against its own embedded dn-sim, a new stream per request (the
#                README's main job: loadgen's HTTP/2 client, dn-sim's server and DataNode)
#   persistent   the same over persistent streams (tonic's client)
# and prints a markdown table: median calls/s per commit and cell, and HEAD ÷ BASE.
#
#   scripts/bench-commits.sh BASE [HEAD] [--rounds N] [-n REQUESTS] [-t THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

usage() {
    echo "usage: scripts/bench-commits.sh BASE [HEAD] [--rounds N] [-n REQUESTS] [-t THREADS]" >&2
    exit 2
}
base="" head="" rounds=5 requests=100000 threads=32
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) rounds=${2:?}; shift 2 ;;
        -n) requests=${2:?}; shift 2 ;;
        -t) threads=${2:?}; shift 2 ;;
        -h|--help) usage ;;
        -*) echo "bench-commits.sh: unknown flag $1" >&2; exit 2 ;;
        *) if [[ -z "$base" ]]; then base=$1; elif [[ -z "$head" ]]; then head=$1; else usage; fi; shift ;;
    esac
done
[[ -n "$base" ]] || usage
head=${head:-HEAD}
base_rev=$(git rev-parse --short "$base^{commit}") || { echo "bench-commits.sh: BASE $base is not a commit" >&2; exit 2; }
head_rev=$(git rev-parse --short "$head^{commit}") || { echo "bench-commits.sh: HEAD $head is not a commit" >&2; exit 2; }

root=$PWD/target/bench-commits
mkdir -p "$root"
build() { # REV → prints the folder holding its release loadgen and dn-sim
    local rev=$1 tree=$root/tree-$1
    if [[ ! -x "$root/bin-$rev/loadgen" ]]; then
        [[ -d "$tree" ]] || git worktree add -q --detach "$tree" "$rev"
        echo "building $rev (release)..." >&2
        (cd "$tree" && CARGO_TARGET_DIR=$root/target CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}" \
            cargo build -q --release --locked --bins -p loadgen -p dn-sim)
        mkdir -p "$root/bin-$rev"
        cp "$root/target/release/loadgen" "$root/target/release/dn-sim" "$root/bin-$rev/"
        git worktree remove --force "$tree"
    fi
    echo "$root/bin-$rev"
}
base_bin=$(build "$base_rev")
head_bin=$(build "$head_rev")

scratch_and_cleanup
rate() { # JSON report → calls/s
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["throughput"]["successes_per_s"])' "$1"
}
run_cell() { # BIN CELL OUT
    local bin=$1 cell=$2 out=$3 mode=()
    [[ $cell == persistent ]] && mode=(--stream-mode persistent)
    "$bin/loadgen" echo -n "$requests" -t "$threads" "${mode[@]}" --format json --output "$out" >/dev/null 2>&1
}

declare -A results=([base,per-request]="" [head,per-request]="" [base,persistent]="" [head,persistent]="")
for ((r = 1; r <= rounds; r++)); do
    for cell in per-request persistent; do
        # Alternate which commit goes first, round by round.
        if (( r % 2 )); then order=("base" "head"); else order=("head" "base"); fi
        for who in "${order[@]}"; do
            bin=$base_bin; [[ $who == head ]] && bin=$head_bin
            run_cell "$bin" "$cell" "$work/$who-$cell-$r.json"
            results[$who,$cell]+="$(rate "$work/$who-$cell-$r.json") "
        done
    done
    echo "round $r of $rounds done" >&2
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "| cell ($requests echoes, -t $threads, $rounds rounds) | $base_rev calls/s | $head_rev calls/s | $head_rev ÷ $base_rev |"
echo "|---|---:|---:|---:|"
for cell in per-request persistent; do
    b=$(echo "${results[base,$cell]}" | median)
    h=$(echo "${results[head,$cell]}" | median)
    printf '| %s | %.0f | %.0f | %.3f |\n' "$cell" "$b" "$h" "$(python3 -c "print($h/$b)")"
    echo "  $cell rounds: $base_rev ${results[base,$cell]}| $head_rev ${results[head,$cell]}" >&2
done
