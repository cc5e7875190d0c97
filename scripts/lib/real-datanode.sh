# Sourced by the scripts that start a real DataNode and run the real `ozone freon` beside loadgen
# (bench-vs-freon.sh, exp-real-handlers.sh, exp-twin.sh, exp-real-starts.sh). Needs `root` (the
# repository) set by the caller.
#
#   real_dn_start DIR VERSION [real-datanode.sh arguments...]
#       starts scripts/real-datanode.sh in the background with its files in DIR (out, log,
#       conf.xml: the cluster's configuration for freon's -conf), waits for its `datanode` line;
#       sets real_dn_pid (not dn_pid: lib.sh's start_dn_sim sets that), dn_addr, dn_ratis (its
#       Ratis client port) and dn_pipeline (the RATIS/ONE pipeline of its containers: the Raft
#       group) and dn_http (the HTTP address whose /prom shows its metrics). Returns 1 (with the
#       log's tail on stderr) if it does not start.
#   real_dn_gc_ms
#       prints the milliseconds its JVM has spent in GC pauses so far (jvm_metrics_gc_time_millis
#       on its /prom, the DataNode's series), or nothing when /prom does not answer.
#   real_dn_pause / real_dn_resume
#       stops (SIGSTOP) / continues (SIGCONT) its JVM, SCM and OM with it: an idle DataNode's
#       JVM still takes CPU from whatever runs beside it (about 6 % of dn-sim's 1 MiB echoes on
#       2 cores). Safe for seconds: the DataNode heartbeats every 30 s and SCM marks it stale
#       after 5 min (hdds.heartbeat.interval, ozone.scm.stale.node.interval; the harness keeps
#       Ozone's defaults), and its Ratis groups have one member.
#   real_dn_stop
#       closes its stdin and sends SIGTERM to the PID it started (its JVM continued first if
#       paused), waits for it.
#   real_dn_warm LOADGEN DIR [CALLS [RUN]]
#       untimed load on the DataNode just started (dn_addr, container 1) until its JIT has
#       settled: RUN-long runs (default 3s) of 0 B echoes at 32 x 32, at least 6, until three in
#       a row lie within 5 % of their highest, at most 15; then CALLS (default 3000) 1 MiB echoes
#       at 8 x 8 and runs of them until three in a row lie within 5 %, at most 8. Prints one
#       line: each run's calls/s. DIR holds its reports.
#   freon_cmd VERSION CONF -- ARGS...
#       sets the array `freon` to the command line of the real freon (its own JVM, 1 GiB heap,
#       Ozone's Java 17 flags, warnings only) with -conf CONF and ARGS.

real_dn_start() {
    local dir="$1" version="$2"
    shift 2
    rm -f "$dir/dn-stdin" "$dir/out"
    mkfifo "$dir/dn-stdin"
    # Its info file (the HTTP address among it): the caller's --info when it gives one (the last
    # one counts), else DIR/info.
    local info="$dir/info" arg prev=""
    for arg in "$@"; do
        [ "$prev" = --info ] && info="$arg"
        prev="$arg"
    done
    "$root/scripts/real-datanode.sh" --ozone-version "$version" --conf-out "$dir/conf.xml" --info "$dir/info" "$@" \
        <"$dir/dn-stdin" >"$dir/out" 2>"$dir/log" &
    real_dn_pid=$!
    exec 9>"$dir/dn-stdin" # holds the DataNode's stdin open; closing it stops the DataNode
    dn_addr=""
    local _
    for _ in $(seq 1 300); do
        if grep -q '^datanode ' "$dir/out" 2>/dev/null && [ -f "$dir/conf.xml" ]; then
            dn_addr="$(awk '/^datanode /{print $2}' "$dir/out")"
            dn_ratis="$(awk '/^ratis /{print $2}' "$dir/out")"
            dn_pipeline="$(awk '/^pipeline /{print $2}' "$dir/out")"
            dn_http="$(awk '/^http /{print $2}' "$info" 2>/dev/null || true)"
            return 0
        fi
        if ! kill -0 "$real_dn_pid" 2>/dev/null; then
            tail -20 "$dir/log" >&2
            return 1
        fi
        sleep 1
    done
    tail -20 "$dir/log" >&2
    return 1
}

real_dn_gc_ms() {
    [ -n "${dn_http:-}" ] || return 0
    curl -sf --max-time 5 "http://$dn_http/prom" 2>/dev/null |
        awk '/^jvm_metrics_gc_time_millis\{.*processname="HddsDatanode"/ { print $2; exit }' || true
}

# real_dn_signal SIG: sends SIG to the DataNode's JVM, real-datanode.sh's child (the script
# itself stays to clean up after it); nothing when no DataNode was started.
real_dn_signal() {
    [ -n "${real_dn_pid:-}" ] || return 0
    local jvm
    jvm="$(pgrep -P "$real_dn_pid" -x java)" || { echo "real_dn_signal $1: no JVM under PID $real_dn_pid" >&2; return 1; }
    kill "-$1" "$jvm"
}
real_dn_pause() { real_dn_signal STOP; }
real_dn_resume() { real_dn_signal CONT; }

real_dn_stop() {
    [ -n "${real_dn_pid:-}" ] || return 0
    real_dn_signal CONT 2>/dev/null || true
    exec 9>&-
    kill -TERM "$real_dn_pid" 2>/dev/null || true
    wait "$real_dn_pid" 2>/dev/null || true
    real_dn_pid="" dn_http=""
}

# _real_dn_settled RATE...: whether the last three runs' calls/s lie within 5 % of their highest.
_real_dn_settled() {
    python3 -c 'import sys; v = [float(x) for x in sys.argv[1:]][-3:]; sys.exit(0 if len(v) == 3 and min(v) > 0 and min(v) >= 0.95 * max(v) else 1)' "$@"
}

# _real_dn_warm_run LOADGEN REPORT ARGS...: one untimed `loadgen echo` run against the DataNode;
# prints its calls/s (0 without a report).
_real_dn_warm_run() {
    local loadgen=$1 report=$2
    shift 2
    rm -f "$report"
    "$loadgen" echo --target "$dn_addr" --container-id 1 -f --format json --output "$report" "$@" >/dev/null 2>&1 || true
    python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["throughput"]["successes_per_s"]))' \
        "$report" 2>/dev/null || echo 0
}

# _real_dn_warm_until LOADGEN REPORT RUN MIN MAX ARGS...: RUN-long warm runs of `loadgen echo ARGS`
# until at least MIN ran and the last three are settled, at most MAX; prints each run's calls/s.
_real_dn_warm_until() {
    local loadgen=$1 report=$2 run=$3 min=$4 max=$5 runs="" i
    shift 5
    for ((i = 1; i <= max; i++)); do
        runs="$runs $(_real_dn_warm_run "$loadgen" "$report" --duration "$run" "$@")"
        # shellcheck disable=SC2086 # one argument per run
        if ((i >= min)) && _real_dn_settled $runs; then break; fi
    done
    echo "$runs"
}

# A fixed 10 s was not enough: the first cell after a start ran at a third of the later rounds'
# calls/s (JIT compiler threads busy). Two runs in a row within 5 % was not enough either: a
# start stopped at 9.0 k and 9.4 k calls/s after 12 s (its cells later made 39 k), another at
# 27.9 k and 26.9 k after 34.6 k, and a 1 MiB echo cell ran at 100.6 calls/s where the same cell
# made 138.3 later in the same JVM. The large payloads' paths: a real 2.2.0 DataNode's 1 MiB echo
# at one request in flight went from 42 to 80 calls/s over its first 3000 or so, after 0 B echoes.
real_dn_warm() {
    local loadgen=$1 dir=$2 calls=${3:-3000} run=${4:-3s} runs first big
    runs="$(_real_dn_warm_until "$loadgen" "$dir/warm.json" "$run" 6 15 --clients 32 -t 32)"
    first="$(_real_dn_warm_run "$loadgen" "$dir/warm.json" --clients 8 -t 8 -n "$calls" --payload-resp 1024)"
    big="$(_real_dn_warm_until "$loadgen" "$dir/warm.json" "$run" 3 8 --clients 8 -t 8 --payload-resp 1024)"
    echo "0 B echoes at 32 x 32:$runs; then $calls 1 MiB echoes at 8 x 8: $first, then 3 s runs of them:$big"
}

freon_cmd() {
    local version="$1" conf="$2"
    shift 3 # VERSION CONF --
    . "$root/scripts/lib/ozone-java.sh"
    ozone_jvm_flags 1g
    local flags=() f
    for f in "${jvm[@]}"; do
        # The harness's log4j file lives in its sources; freon's classpath does not hold it.
        case "$f" in
            -Dlog4j.configuration=*) flags+=("-Dlog4j.configuration=file:$root/interop/ozone/src/main/resources/real-datanode-log4j.properties") ;;
            *) flags+=("$f") ;;
        esac
    done
    freon=(java "${flags[@]}" -cp "$(cat "$root/interop/ozone/freon/target/classpath-$version.txt")"
        org.apache.hadoop.ozone.freon.Freon -conf "$conf" "$@")
}
