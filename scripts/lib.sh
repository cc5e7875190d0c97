# Helpers shared by the scripts in this folder. Source it; it changes nothing by itself.

# A free TCP port on 127.0.0.1, for a peer that cannot bind port 0 and say which port it got
# (iperf3, Prometheus). dn-sim and loadgen never need it: see start_dn_sim.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Installs Debian packages that are missing (as root, or through sudo).
ensure_debian_packages() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "installing Debian packages: ${missing[*]}" >&2
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Waits until an HTTP URL answers 200, up to $2 seconds (default 20).
wait_http() {
    local url=$1 deadline=$((SECONDS + ${2:-20}))
    until curl -fsS -o /dev/null "$url" 2>/dev/null; do
        [ $SECONDS -ge $deadline ] && { echo "no answer from $url" >&2; return 1; }
        sleep 0.2
    done
}

# Writes a containers.conf for Podman on machines without systemd (as here) into folder $1 and
# exports CONTAINERS_CONF: no ulimits it cannot set, runc as the runtime.
podman_conf() {
    printf '%s\n' '[containers]' 'default_ulimits = []' '' '[engine]' 'runtime = "runc"' >"$1/containers.conf"
    export CONTAINERS_CONF="$1/containers.conf"
}

# Fills folder $1 with what a FROM scratch image needs to run the binaries $2...: the shared
# libraries ldd lists for them (glibc, libgcc_s: what distroless/cc has), /etc/passwd and
# /etc/group with root, nobody (65534) and nonroot (65532), and /tmp.
scratch_rootfs() {
    local root=$1 b lib
    shift
    mkdir -p "$root/etc" "$root/tmp"
    chmod 1777 "$root/tmp"
    printf '%s\n' root:x:0:0:root:/root:/sbin/nologin nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin \
        nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin >"$root/etc/passwd"
    printf '%s\n' root:x:0: nobody:x:65534: nonroot:x:65532: >"$root/etc/group"
    for b in "$@"; do
        for lib in $(ldd "$b" | grep -o '/[^ ]*'); do
            cp --parents -L "$lib" "$root/"
        done
    done
}

# Sets LOADGEN and DN_SIM to the release binaries, building those not given in the environment
# (CARGO_BUILD_JOBS, default 1, so that a benchmark's build does not crowd the machine).
release_binaries() {
    local build=()
    [[ -n "${DN_SIM:-}" ]] || build+=(-p dn-sim)
    [[ -n "${LOADGEN:-}" ]] || build+=(-p loadgen)
    if [[ ${#build[@]} -gt 0 ]]; then
        echo "building ${build[*]} (release)..." >&2
        CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" cargo build -q --release --bins "${build[@]}"
    fi
    LOADGEN=${LOADGEN:-${CARGO_TARGET_DIR:-target}/release/loadgen}
    DN_SIM=${DN_SIM:-${CARGO_TARGET_DIR:-target}/release/dn-sim}
}

# A scratch folder in $work and an exit trap that stops every PID the script appended to the
# array pids (only those: the script's own servers) and removes the folder.
scratch_and_cleanup() {
    work=$(mktemp -d)
    pids=()
    trap _lib_cleanup EXIT
}
_lib_cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}

# Waits until something listens on 127.0.0.1:$1, up to 10 s; else says so and returns 1.
wait_port() {
    local _
    for _ in $(seq 100); do
        (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "nothing listens on 127.0.0.1:$1" >&2
    return 1
}

# ---- Skip policy (scripts/test.sh). A check exits 3, "skipped", only for a reason outside the
# project that a probe has established: a package registry out of reach. Anything else that
# stops it (a compile error, a bad flag, a crash) is a failure, exit 1. Under CI=true test.sh
# counts a skip as a failure too.

# Whether Maven Central answers: a HEAD request for one small POM of the Ozone release the
# harness uses (not through mvn, whose local repository could answer for it).
maven_central_reachable() {
    curl -fsSI --max-time 20 -o /dev/null \
        https://repo.maven.apache.org/maven2/org/apache/ozone/hdds-config/2.2.0/hdds-config-2.2.0.pom
}

# Whether Debian's archive answers (the Release file of the suite apt uses here).
debian_archive_reachable() {
    curl -fsSI --max-time 20 -o /dev/null http://deb.debian.org/debian/dists/bookworm/Release
}

# Whether PyPI answers (its simple index of one package).
pypi_reachable() {
    curl -fsSI --max-time 20 -o /dev/null https://pypi.org/simple/pip/
}

# ensure_java_maven NAME: Java 17 and Maven, installed from Debian's packages when missing.
# Returns 0 when both are there; 3 (one line on stderr) when the install failed and Debian's
# archive is out of reach; 1 when it failed with the archive in reach.
ensure_java_maven() {
    command -v java >/dev/null && command -v mvn >/dev/null && return 0
    ensure_debian_packages openjdk-17-jdk-headless maven >&2 || true
    command -v java >/dev/null && command -v mvn >/dev/null && return 0
    if ! debian_archive_reachable; then
        echo "$1: Java 17/Maven missing and Debian's archive is out of reach (probe: deb.debian.org), so they could not be installed" >&2
        return 3
    fi
    echo "$1: installing openjdk-17-jdk-headless and maven failed with Debian's archive in reach" >&2
    return 1
}

# harness_setup NAME VERSION [--freon]: Java and Maven (ensure_java_maven), then
# interop/ozone/setup.sh. Returns 0 when built; 3 (one line on stderr) when it failed and Maven
# Central is out of reach (probe: maven_central_reachable); 1 for any other failure (a compile
# error in the harness, a missing artifact), with the end of Maven's log on stderr.
harness_setup() {
    local name=$1 version=$2 status=0 log
    shift 2
    ensure_java_maven "$name" || return $?
    log=$(mktemp)
    interop/ozone/setup.sh --ozone-version "$version" "$@" >"$log" 2>&1 || status=$?
    if [ "$status" = 0 ]; then
        rm -f "$log"
        return 0
    fi
    if [ "$status" = 3 ]; then
        # setup.sh's own skip: a release Maven Central does not serve (2.0.0, 2.1.0), not built here.
        tail -1 "$log" >&2
        rm -f "$log"
        return 3
    fi
    if ! maven_central_reachable; then
        echo "$name: Maven Central is out of reach (probe: HEAD of hdds-config-2.2.0.pom failed), so no Ozone $version harness: $(grep -m1 -E 'ERROR|error' "$log" | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-200)" >&2
        rm -f "$log"
        return 3
    fi
    tail -30 "$log" >&2
    rm -f "$log"
    echo "$name: interop/ozone/setup.sh failed for Ozone $version with Maven Central in reach (above): a broken harness, not a skip" >&2
    return 1
}

# start_dn_sim READY_FILE CMD...: starts CMD (a dn-sim, perhaps behind taskset or env, with its
# flags) in the background on port 0, `--listen 127.0.0.1:0` and, unless CMD names one,
# `--metrics-listen 127.0.0.1:0`, then waits for the ports it writes to READY_FILE: no port is
# guessed. Sets dn_pid, ready_client, ready_admin (as wait_ready_file) and ready_port (the client
# port alone). Redirect the call to redirect dn-sim's output. Returns 1 when dn-sim exits first.
start_dn_sim() {
    local file=$1 arg
    shift
    local metrics=(--metrics-listen 127.0.0.1:0)
    for arg in "$@"; do
        [[ $arg == --metrics-listen || $arg == --metrics-listen=* ]] && metrics=()
    done
    rm -f "$file"
    "$@" --listen 127.0.0.1:0 "${metrics[@]}" --ready-file "$file" &
    dn_pid=$!
    wait_ready_file "$file" "$dn_pid" || return 1
    ready_port=${ready_client##*:}
}

# wait_ready_file FILE PID: waits (10 s at most, or $ready_wait seconds) for the `--ready-file
# FILE` of the dn-sim with PID, started on port 0 (`--listen 127.0.0.1:0`): no port is guessed.
# Sets ready_client and ready_admin (HOST:PORT; ready_admin empty with --metrics-listen none);
# with `--datanodes N` the file also has a `datanode I UUID client=ADDR ...` line per identity.
# Returns 1, saying so, when dn-sim exits first or writes no file in time.
wait_ready_file() {
    local file=$1 pid=$2 _
    ready_client="" ready_admin=""
    for _ in $(seq $(( ${ready_wait:-10} * 20 ))); do
        if [ -f "$file" ]; then
            ready_client=$(awk '$1 == "client" {print $2}' "$file")
            ready_admin=$(awk '$1 == "admin" {print $2}' "$file")
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || { echo "dn-sim (pid $pid) exited before serving" >&2; return 1; }
        sleep 0.05
    done
    echo "dn-sim (pid $pid) wrote no $file within ${ready_wait:-10} s" >&2
    return 1
}

# Whether the Go module proxy answers (the version info of the helm release scripts/check-helm.sh
# installs).
go_proxy_reachable() {
    curl -fsSI --max-time 20 -o /dev/null https://proxy.golang.org/helm.sh/helm/v3/@v/v3.22.0.info
}
