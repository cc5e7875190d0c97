#!/usr/bin/env bash
# End-to-end check with a real Prometheus server: Debian's `prometheus` package (installed when
# missing) scrapes a dn-sim started here through the repo's scrape config, loadgen sends echoes,
# and Prometheus's HTTP query API must show storage_container_metrics_num_echo rising. Also lints
# dn-sim's /metrics exposition with `promtool check metrics`. Loopback only; cleans up after itself.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_debian_packages prometheus curl python3
BIN=${BIN:-target/debug}
[ -x "$BIN/dn-sim" ] && [ -x "$BIN/loadgen" ] || cargo build -q -p dn-sim -p loadgen

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Everything on port 0: dn-sim's addresses from its ready file, Prometheus's from its log line
# `msg="Listening on" address=127.0.0.1:PORT` (the address it bound, not the flag's).
"$BIN/dn-sim" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --ready-file "$work/dn-sim.ready" \
    >"$work/dn-sim.log" 2>&1 &
pids+=($!)
wait_ready_file "$work/dn-sim.ready" "${pids[-1]}" || { cat "$work/dn-sim.log" >&2; exit 1; }
grpc_port=${ready_client##*:}
http_port=${ready_admin##*:}
wait_http "http://127.0.0.1:$http_port/prom"

# The shipped scrape config, pointed at this dn-sim and scraping every second.
sed -e "s/dn-sim:9882/127.0.0.1:$http_port/" -e "s/scrape_interval: 5s/scrape_interval: 1s/" \
    deploy/prometheus/prometheus.yml >"$work/prometheus.yml"
promtool check config "$work/prometheus.yml" >/dev/null
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address=127.0.0.1:0 >"$work/prometheus.log" 2>&1 &
pids+=($!)
prom_port=""
deadline=$((SECONDS + 30))
until prom_port=$(sed -nE 's/.*msg="Listening on" address=127\.0\.0\.1:([0-9]+).*/\1/p' "$work/prometheus.log") &&
    [ -n "$prom_port" ]; do
    kill -0 "${pids[-1]}" 2>/dev/null || { echo "FAIL: Prometheus exited"; cat "$work/prometheus.log"; exit 1; }
    [ $SECONDS -ge $deadline ] && { echo "FAIL: Prometheus said no address"; cat "$work/prometheus.log"; exit 1; }
    sleep 0.2
done
wait_http "http://127.0.0.1:$prom_port/-/ready" 30

query() {
    curl -fsS "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "absent")'
}

# Wait for a first scrape, then load.
deadline=$((SECONDS + 30))
until [ "$(query 'up{job="dn-sim"}')" = "1" ]; do
    [ $SECONDS -ge $deadline ] && { echo "FAIL: Prometheus never scraped dn-sim"; cat "$work/prometheus.log"; exit 1; }
    sleep 0.5
done
before=$(query storage_container_metrics_num_echo)
"$BIN/loadgen" echo --target "127.0.0.1:$grpc_port" -n 2000 -t 8 >"$work/loadgen.out" 2>/dev/null

deadline=$((SECONDS + 30))
after=$before
until [ "$after" != "absent" ] && python3 -c "import sys; sys.exit(0 if float('$after') >= 2000 else 1)"; do
    [ $SECONDS -ge $deadline ] && { echo "FAIL: storage_container_metrics_num_echo is $after after 2000 echoes (before: $before)"; exit 1; }
    sleep 0.5
    after=$(query storage_container_metrics_num_echo)
done
echo "ok: Prometheus sees storage_container_metrics_num_echo go from $before to $after"

rate=$(query 'sum(rate(dn_sim_requests_total{type="Echo",result="SUCCESS"}[1m]))')
echo "ok: dn_sim_requests_total rate query answers ($rate/s)"

curl -fsS "http://127.0.0.1:$http_port/metrics" | promtool check metrics
echo "ok: promtool check metrics passes on /metrics"
