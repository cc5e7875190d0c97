#!/usr/bin/env bash
# Builds the harness for one Ozone release: downloads its jars from Maven Central (into Maven's
# local repository, ~/.m2 unless MAVEN_OPTS says otherwise), compiles the Java classes into
# target/classes-VERSION and writes the runtime classpath to target/classpath-VERSION.txt. 2.0.0 and
# 2.1.0 are not on Maven Central: they must be built from source into that repository first (see
# below). With --freon it builds, instead, the classpath of the real `ozone freon` (interop/ozone/freon,
# the ozone-freon artifact) into freon/target/classpath-VERSION.txt. Prints nothing on success
# unless -v.
# Usage: interop/ozone/setup.sh [--ozone-version V] [--freon] [-v]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version=2.2.0
quiet=-q
freon=0
while [ $# -gt 0 ]; do
    case "$1" in
        --ozone-version) version="${2:?--ozone-version needs a value}"; shift 2 ;;
        -v) quiet=; shift ;;
        --freon) freon=1; shift ;;
        *) echo "setup.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
# (mvn prints colour codes around the value even in batch mode; strip them.)
repo="$(mvn -q -B help:evaluate -Dexpression=settings.localRepository -DforceStdout 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' || true)"
# Only an absolute path is a repository path (a broken mvn prints an error instead).
case "$repo" in /*) ;; *) repo="$HOME/.m2/repository" ;; esac
case "$version" in
    2.0.0|2.1.0)
        # Maven Central has no DataNode (hdds-container-service) and no ozone-mini-cluster for
        # these releases: their maven-metadata.xml lists 2.2.0 as the first. They run only when
        # built from source and installed into the local repository, e.g. from the release's tag:
        #   mvn install -DskipTests -DskipRecon -DskipDocs -DskipShade -pl MODULE -am
        # with MODULE hadoop-ozone/mini-cluster (2.1.0) or hadoop-ozone/integration-test (2.0.0,
        # whose test-jar holds MiniOzoneCluster; so not -Dmaven.test.skip).
        if [ "$version" = 2.0.0 ]; then
            built="$repo/org/apache/ozone/ozone-integration-test/$version/ozone-integration-test-$version-tests.jar"
        else
            built="$repo/org/apache/ozone/ozone-mini-cluster/$version/ozone-mini-cluster-$version.jar"
        fi
        if [ ! -f "$built" ]; then
            echo "setup.sh: Ozone $version: Maven Central serves no hdds-container-service or ozone-mini-cluster for it (first release there: 2.2.0), and it is not built locally ($built is missing)" >&2
            exit 3
        fi ;;
    *) ;;
esac

# Maven Central serves hdds-common/hdds-client 2.2.0 but not their parent POM; install our stand-in.
standin="$here/standin/hdds-hadoop-dependency-client-$version.pom"
if [ -f "$standin" ]; then
    dest="$repo/org/apache/ozone/hdds-hadoop-dependency-client/$version"
    if [ ! -f "$dest/hdds-hadoop-dependency-client-$version.pom" ]; then
        mkdir -p "$dest"
        rm -f "$dest"/*.lastUpdated
        cp "$standin" "$dest/"
    fi
fi

if [ "$freon" = 1 ]; then
    # Maven Central serves ozone-freon from 2.2.0 on (2.0.0, 2.1.0: built from source, as above,
    # with -pl hadoop-ozone/freon -am).
    if [ ! -f "$here/freon/target/classpath-$version.txt" ] || [ "$here/freon/pom.xml" -nt "$here/freon/target/classpath-$version.txt" ]; then
        mvn $quiet -B -f "$here/freon/pom.xml" -Dozone.version="$version" compile
    fi
    exit 0
fi

cp_file="$here/target/classpath-$version.txt"
stamp="$here/target/.built-$version"
newest_src="$(find "$here/src" "$here/pom.xml" -newer "$stamp" 2>/dev/null | head -1 || true)"
if [ -f "$cp_file" ] && [ -d "$here/target/classes-$version" ] && [ -f "$stamp" ] && [ -z "$newest_src" ]; then
    exit 0
fi
mvn $quiet -B -f "$here/pom.xml" -Dozone.version="$version" compile
touch "$stamp"
