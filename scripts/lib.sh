# Helpers shared by the scripts in this folder. Source it; it changes nothing by itself.

# A free TCP port on 127.0.0.1.
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
