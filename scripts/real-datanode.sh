#!/usr/bin/env bash
# A real Apache Ozone DataNode on demand (interop/ozone): SCM, OM and one DataNode in one JVM
# (MiniOzoneCluster; security, tokens and TLS off, as by default), the containers created through
# SCM. Prints `ratis 127.0.0.1:PORT` (its Ratis client port), `pipeline UUID` (the RATIS/ONE
# pipeline of the containers: the Raft group) and last `datanode 127.0.0.1:PORT` (the DataNode's
# client port) on stdout when it can serve, and serves until SIGTERM or until its stdin closes; its data is in a temporary
# directory removed on exit. Ozone's logs go to stderr.
#
# Usage: scripts/real-datanode.sh [--ozone-version V] [--containers LIST] [--info FILE]
#                                 [--conf-out FILE] [--heap SIZE] [-D key=value]...
#   --ozone-version  Ozone release (default 2.2.0, from Maven Central; 2.0.0, 2.1.0 if built locally)
#   --containers     container IDs to create, e.g. 1-100 (default 1); SCM numbers them 1, 2, 3, …
#   --info FILE      also write `datanode ADDR`, `uuid UUID`, `http ADDR` (/prom), `version V`
#   --conf-out FILE  also write the cluster's configuration (Hadoop XML) for `freon -conf FILE`
#   --heap           the JVM's maximum heap (default 1g; `default`: no -Xmx, the JVM's default,
#                    a quarter of the memory, as Ozone's launcher without OZONE_HEAPSIZE_MAX)
#   -D key=value     an Ozone configuration key for the cluster and so the DataNode, e.g.
#                    -D hdds.datanode.read.chunk.threads.per.volume=1
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="${OZONE_VERSION:-2.2.0}"
heap=1g
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --ozone-version) version="${2:?--ozone-version needs a value}"; shift 2 ;;
        --heap) heap="${2:?--heap needs a value}"; shift 2 ;;
        --containers|--info|--conf-out|-D) [ $# -ge 2 ] || { echo "real-datanode.sh: $1 needs a value" >&2; exit 2; }
            args+=("$1" "$2"); shift 2 ;;
        -D*) args+=("$1"); shift ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "real-datanode.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
command -v java >/dev/null || { echo "real-datanode.sh: java not found (Java 17 is needed)" >&2; exit 2; }
command -v mvn >/dev/null || { echo "real-datanode.sh: mvn not found (Maven is needed to fetch Ozone's jars)" >&2; exit 2; }

"$root/interop/ozone/setup.sh" --ozone-version "$version" >&2
cp="$root/interop/ozone/target/classes-$version:$(cat "$root/interop/ozone/target/classpath-$version.txt")"

# The JVM flags Ozone needs on Java 17.
. "$root/scripts/lib/ozone-java.sh"
ozone_jvm_flags "$heap"
# Ozone's native-library loader unpacks into the working directory and the mini cluster's data
# goes under java.io.tmpdir: both in one scratch directory, removed once the JVM has exited,
# even if it was killed before its shutdown hook removed the data itself.
work="$(mktemp -d "${TMPDIR:-/tmp}/real-datanode-cwd.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"
# Not exec: the trap removes the scratch directory. The JVM gets the caller's SIGTERM forwarded
# and reads the caller's stdin (closing it stops the DataNode).
# (`<&0`: a background job's stdin would otherwise be /dev/null.)
java "${jvm[@]}" -Djava.io.tmpdir="$work" -cp "$cp" org.ozonedn.interop.RealDatanode "${args[@]}" <&0 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
status=0
wait "$pid" || status=$?
# A trapped signal interrupts `wait`; wait again for the JVM's own exit.
if kill -0 "$pid" 2>/dev/null; then
    wait "$pid" || status=$?
fi
exit "$status"
