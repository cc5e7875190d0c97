# Sourced by the scripts that start a real DataNode and run the real `ozone freon` beside loadgen
# (bench-vs-freon.sh, exp-real-handlers.sh). Needs `root` (the repository) set by the caller.
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
