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
