# Shared by the throttling experiments (scripts/exp-throttling.sh, scripts/exp-metastability.sh).
# Source it from the repository root.

# Sets QUICK from the script's arguments: --quick, or nothing; anything else is exit 2.
exp_parse_args() {
    QUICK=0
    for a in "$@"; do
        case "$a" in
        --quick) QUICK=1 ;;
        *)
            echo "$(basename "$0"): unknown argument '$a' (use --quick)" >&2
            exit 2
            ;;
        esac
    done
}

# Builds what is run (a no-op when up to date), so a stale binary never answers: the full run
# measures the release build, --quick the debug build the tests use. Sets BIN unless it was given.
exp_build() {
    if [ -z "${BIN:-}" ]; then
        if [ "$QUICK" = 1 ]; then
            cargo build -q -p dn-sim -p loadgen
            BIN=target/debug
        else
            cargo build -q --release -p dn-sim -p loadgen
            BIN=target/release
        fi
    fi
}

# After OUTDIR and NAME are set: sets and exports OUT (per-process reports) and CSV (the per-second series) and clears OUT of an
# earlier run's reports. --quick writes under target/, so committed results are never overwritten.
exp_prepare_output() {
    OUT="$OUTDIR/$NAME"
    CSV="$OUTDIR/$NAME.csv"
    export OUT CSV
    mkdir -p "$OUT"
    rm -f "$OUT"/*.json "$OUT"/*.wall "$OUT"/*.log
}

