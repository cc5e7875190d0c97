#!/usr/bin/env bash
# A real Apache Ozone OM and SCM for simulated DataNodes (interop/ozone, RealCluster): both in one
# JVM (MiniOzoneCluster without DataNodes, safe mode off, security off; real DataNodes only with
# --datanodes) on ports free at start, bound to 127.0.0.1 (but SCM's and OM's Ratis and gRPC
# ports, which have no bind-host key in Ozone 2.2.0). Prints `om ADDR` (OM's RPC address),
# `nodes URL` (GET: one line per DataNode SCM knows: UUID HOST IP OPSTATE HEALTH capacity= used=
# remaining= committed= heartbeat_age_ms=; beside it, GET .../allocate?replication=rs-3-2-1024k
# or RATIS/ONE asks SCM for a container: `container ID pipeline UUID nodes UUID,...`) and last
# `scm ADDR` (SCM's DataNode port: give it to `dn-sim --scm`) on stdout, and serves until
# SIGTERM or until its stdin closes; its data is in a temporary directory removed on exit.
# Ozone's logs go to stderr.
#
# Usage: scripts/real-cluster.sh [--ozone-version V] [--datanodes K] [--conf-out FILE]
#                                [--heap SIZE] [-D key=value]...
#   --ozone-version  Ozone release (default 2.2.0, from Maven Central)
#   --datanodes K    also start K real DataNodes in the same JVM (default 0)
#   --conf-out FILE  also write the cluster's client configuration (Hadoop XML, an ozone-site.xml)
#                    for `ozone` commands and freon (`-conf FILE`)
#   --heap           the JVM's maximum heap (default 1g)
#   -D key=value     an Ozone configuration key for the cluster, e.g. -D ozone.scm.container.size=64MB
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="${OZONE_VERSION:-2.2.0}"
heap=1g
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --ozone-version) version="${2:?--ozone-version needs a value}"; shift 2 ;;
        --heap) heap="${2:?--heap needs a value}"; shift 2 ;;
        --datanodes|--conf-out|-D) [ $# -ge 2 ] || { echo "real-cluster.sh: $1 needs a value" >&2; exit 2; }
            args+=("$1" "$2"); shift 2 ;;
        -D*) args+=("$1"); shift ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "real-cluster.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
command -v java >/dev/null || { echo "real-cluster.sh: java not found (Java 17 is needed)" >&2; exit 2; }
command -v mvn >/dev/null || { echo "real-cluster.sh: mvn not found (Maven is needed to fetch Ozone's jars)" >&2; exit 2; }

"$root/interop/ozone/setup.sh" --ozone-version "$version" >&2
cp="$root/interop/ozone/target/classes-$version:$(cat "$root/interop/ozone/target/classpath-$version.txt")"

# The JVM flags Ozone needs on Java 17.
. "$root/scripts/lib/ozone-java.sh"
ozone_jvm_flags "$heap"
# Ozone's native-library loader unpacks into the working directory and the mini cluster's data
# goes under java.io.tmpdir: both in one scratch directory, removed once the JVM has exited,
# even if it was killed before its shutdown hook removed the data itself.
work="$(mktemp -d "${TMPDIR:-/tmp}/real-cluster-cwd.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"
# Not exec: the trap removes the scratch directory. The JVM gets the caller's SIGTERM forwarded
# and reads the caller's stdin (closing it stops the DataNode).
# (`<&0`: a background job's stdin would otherwise be /dev/null.)
java "${jvm[@]}" -Djava.io.tmpdir="$work" -cp "$cp" org.ozonedn.interop.RealCluster "${args[@]}" <&0 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
status=0
wait "$pid" || status=$?
# A trapped signal interrupts `wait`; wait again for the JVM's own exit.
if kill -0 "$pid" 2>/dev/null; then
    wait "$pid" || status=$?
fi
exit "$status"
