#!/usr/bin/env bash
# Static checks of deploy/ and the compose files, which need no container engine:
# - docker-compose.yml alone and with deploy/local/compose.local.yml: Debian's docker-compose 1.29
#   (`config -q`) and the Compose spec (`check-jsonschema --builtin-schema vendor.compose-spec`,
#   from PyPI);
# - the Prometheus scrape config (`promtool check config`);
# - Grafana's provisioning and dashboard (scripts/check-dashboard.py): one datasource uid used by
#   every panel, every metric exported by dn-sim (its /prom, from a dn-sim started and loaded here
#   with faults and rejections), and every
#   expression parsed as PromQL by `promtool check rules`.
# Grafana itself does not run here (no Grafana binary in the reachable registries).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_debian_packages docker-compose prometheus curl python3 python3-yaml
python3 -c 'import yaml' 2>/dev/null || pip install -q pyyaml
command -v check-jsonschema >/dev/null || pip install -q check-jsonschema
BIN=${BIN:-target/debug}
[ -x "$BIN/dn-sim" ] && [ -x "$BIN/loadgen" ] || cargo build -q --locked -p dn-sim -p loadgen

work=$(mktemp -d)
pid=""
cleanup() {
    [ -z "$pid" ] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$work"
}
trap cleanup EXIT

# Interpolated variables get their defaults; the pass-through ones stay unset.
for files in "docker-compose.yml" "docker-compose.yml deploy/local/compose.local.yml"; do
    args=()
    for f in $files; do args+=(-f "$f"); done
    docker-compose "${args[@]}" config -q
    echo "ok: docker-compose $(docker-compose version --short) config -q: $files"
done
check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml deploy/local/compose.local.yml
echo "ok: Compose spec schema (check-jsonschema $(check-jsonschema --version | grep -o '[0-9.]*$')): docker-compose.yml, deploy/local/compose.local.yml"

promtool check config deploy/prometheus/prometheus.yml >/dev/null
echo "ok: promtool check config deploy/prometheus/prometheus.yml"

# Counters with labels appear on /prom once they count something: faults and rejections first.
# dn-sim binds port 0 and writes the ports it got to a ready file: none is guessed.
"$BIN/dn-sim" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --ready-file "$work/ready" \
    --fault echo=IO_EXCEPTION:0.5 --limit-ops 20 >"$work/dn-sim.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -f "$work/ready" ] || sleep 0.1; done
[ -f "$work/ready" ] || { cat "$work/dn-sim.log"; echo "dn-sim wrote no ready file within 10 s" >&2; exit 1; }
grpc_addr=$(awk '$1 == "client" {print $2}' "$work/ready")
http_port=$(awk '$1 == "admin" {print $2}' "$work/ready"); http_port=${http_port##*:}
wait_http "http://127.0.0.1:$http_port/prom"
# Half the echoes fail on purpose (exit 1); a bad flag or no answer at all (exit 2) is a failure.
lg=0
"$BIN/loadgen" echo --target "$grpc_addr" -n 50 -t 4 -f >/dev/null 2>"$work/loadgen.err" || lg=$?
[ "$lg" -le 1 ] || { cat "$work/loadgen.err" >&2; echo "loadgen exited $lg" >&2; exit 1; }
curl -fsS "http://127.0.0.1:$http_port/prom" >"$work/prom.txt"
python3 scripts/check-dashboard.py deploy/grafana/provisioning deploy/grafana/dashboards/dn-sim.json \
    "$work/prom.txt" "$work/dashboard-rules.yml"
promtool check rules "$work/dashboard-rules.yml" >/dev/null
echo "ok: promtool check rules parses every dashboard expression"
