#!/usr/bin/env bash
# Offline checks of the Helm chart deploy/helm/ozone-dn-lab (no cluster runs here):
# - `helm lint` (default values, and strict with each values file of the chart's ci/ folder);
# - `helm template` with the default values and with each ci/*-values.yaml (ServiceMonitor on,
#   external targets without dn-sim, …), for two Kubernetes versions (KUBE_VERSIONS);
# - every rendered manifest validated strictly (unknown fields are errors) against that
#   version's schemas, with PyPI's kubernetes-validate (it ships the schemas of Kubernetes
#   1.25-1.37); every object must have passed, none may be left without a schema, except:
# - the Prometheus Operator's ServiceMonitor, a CRD in no Kubernetes schema: it is decoded
#   strictly into the operator's own Go API types (scripts/helm-check/servicemonitor, a Go
#   module from the Go module proxy) instead;
# - the consistency the chart relies on: the loadgen Job's arguments hold the chart's own
#   files/loadgen-args (what scripts/shards-local.sh runs), the merge Job names the same result
#   files the shards write, and one --start-at for all.
# Tools are installed on first use under target/tools (helm: `go install helm.sh/helm/v3/cmd/
# helm@v3.22.0`, about 2.5 min on 2 cores; kubernetes-validate in a venv), so a second run is fast.
# Exit: 0 all pass; 1 a check failed or a tool could not be installed with its registry in
# reach; 3 a tool could not be installed and a probe finds its registry out of reach.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

chart=deploy/helm/ozone-dn-lab
versions=(${KUBE_VERSIONS:-1.30.0 1.34.0})
tools=$PWD/target/tools
mkdir -p "$tools/bin"
export GOPATH=$tools/go GOBIN=$tools/bin GOCACHE=$tools/go-cache GOFLAGS=-modcacherw
helm=$tools/bin/helm
kv=$tools/kv-venv/bin/kubernetes-validate
sm_check=$tools/bin/servicemonitor-check

# Go tools: helm and the ServiceMonitor checker (rebuilt when its source changes).
go_unreachable() {
    echo "check-helm: $1 could not be built and the Go module proxy is out of reach (probe: proxy.golang.org)" >&2
    exit 3
}
if [ ! -x "$helm" ]; then
    command -v go >/dev/null || { echo "check-helm: no Go toolchain to build helm with" >&2; exit 1; }
    echo "installing helm v3.22.0 (go install, once; cached in target/tools)..."
    if ! nice go install helm.sh/helm/v3/cmd/helm@v3.22.0 >"$tools/helm-install.log" 2>&1; then
        go_proxy_reachable || go_unreachable helm
        tail -20 "$tools/helm-install.log" >&2
        echo "check-helm: go install of helm failed with the Go module proxy in reach" >&2
        exit 1
    fi
fi
sm_src=scripts/helm-check/servicemonitor
sm_stamp=$(cat "$sm_src"/go.mod "$sm_src"/go.sum "$sm_src"/main.go | sha256sum | cut -c1-16)
if [ ! -x "$sm_check" ] || [ "$(cat "$tools/servicemonitor-check.stamp" 2>/dev/null)" != "$sm_stamp" ]; then
    command -v go >/dev/null || { echo "check-helm: no Go toolchain" >&2; exit 1; }
    echo "building the ServiceMonitor checker (once; cached in target/tools)..."
    if ! (cd "$sm_src" && nice go build -o "$sm_check" .) >"$tools/sm-build.log" 2>&1; then
        go_proxy_reachable || go_unreachable "the ServiceMonitor checker"
        tail -20 "$tools/sm-build.log" >&2
        exit 1
    fi
    echo "$sm_stamp" >"$tools/servicemonitor-check.stamp"
fi
if [ ! -x "$kv" ]; then
    echo "installing kubernetes-validate 1.37.0 (PyPI, in a venv under target/tools)..."
    if ! { python3 -m venv "$tools/kv-venv" && "$tools/kv-venv/bin/pip" install -q kubernetes-validate==1.37.0; } \
        >"$tools/kv-install.log" 2>&1; then
        rm -rf "$tools/kv-venv"
        if ! pypi_reachable; then
            echo "check-helm: kubernetes-validate could not be installed and PyPI is out of reach (probe: pypi.org)" >&2
            exit 3
        fi
        tail -20 "$tools/kv-install.log" >&2
        echo "check-helm: installing kubernetes-validate failed with PyPI in reach" >&2
        exit 1
    fi
fi
echo "$("$helm" version --short), kubernetes-validate $("$kv" --version 2>&1 | tail -1)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$helm" lint "$chart" --kube-version "${versions[-1]}" || fail "helm lint (default values)"
value_sets=(default)
for f in "$chart"/ci/*-values.yaml; do
    value_sets+=("$f")
    "$helm" lint --strict "$chart" --kube-version "${versions[-1]}" -f "$f" >/dev/null \
        || fail "helm lint --strict -f $f"
done

for set in "${value_sets[@]}"; do
    args=()
    [ "$set" = default ] || args=(-f "$set")
    for v in "${versions[@]}"; do
        name=$(basename "$set" .yaml)-$v
        out=$work/$name.yaml
        if ! "$helm" template lab "$chart" --namespace lab --kube-version "$v" "${args[@]}" >"$out" 2>"$work/$name.err"; then
            cat "$work/$name.err"
            fail "helm template ($set, Kubernetes $v)"
            continue
        fi
        objects=$(grep -c '^kind: ' "$out" || true)
        monitors=$(grep -c '^kind: ServiceMonitor$' "$out" || true)
        log=$("$kv" -k "$v" --strict "$out" 2>&1 || true)
        passed=$(grep -c ' passed for resource ' <<<"$log" || true)
        unknown=$(grep 'find schema' <<<"$log" | grep -vc 'kind ServiceMonitor with api version monitoring.coreos.com/v1' || true)
        if grep -q '^ERROR' <<<"$log" || [ "$passed" != $((objects - monitors)) ] || [ "$unknown" != 0 ]; then
            grep -v ' passed for resource ' <<<"$log"
            fail "strict schema validation ($set, Kubernetes $v): $passed of $((objects - monitors)) passed"
        else
            extra=""
            [ "$monitors" = 0 ] || extra=", $monitors ServiceMonitor(s) checked apart"
            echo "ok: $set, Kubernetes $v: $passed object(s) valid (strict)$extra"
        fi
        if [ "$monitors" != 0 ]; then
            "$sm_check" <"$out" || fail "ServiceMonitor shape ($set, Kubernetes $v)"
        fi
        # What scripts/shards-local.sh relies on.
        python3 - "$out" "$chart/files/loadgen-args" "$set" <<'EOF' || fail "chart consistency ($set, Kubernetes $v)"
import re, sys
text, default_args, value_set = open(sys.argv[1]).read(), open(sys.argv[2]).read().split(), sys.argv[3]
docs = text.split("\n---")
def block(kind_name):
    return next((d for d in docs if re.search(r"^kind: Job$", d, re.M) and re.search(rf"^  name: .*-{kind_name}-", d, re.M)), None)
job, merge = block("loadgen"), block("merge")
problems = []
if job is None:
    problems.append("no loadgen Job")
else:
    args = re.findall(r"^            - (.*)$", job.split("          args:\n", 1)[1].split("          ports:", 1)[0], re.M)
    args = [a.strip('"') for a in args]
    if value_set == "default" and args[:len(default_args)] != default_args:
        problems.append(f"the Job's workload {args[:len(default_args)]} is not files/loadgen-args {default_args}")
    if "completionMode: Indexed" not in job:
        problems.append("the loadgen Job is not Indexed")
    shards = re.search(r"^  completions: (\d+)$", job, re.M).group(1)
    if f"  parallelism: {shards}" not in job or f"--shards={shards}" not in args:
        problems.append("completions, parallelism and --shards differ")
    start = [a for a in args if a.startswith("--start-at=")]
    if len(start) != 1:
        problems.append("not one --start-at")
    out = [a for a in args if a.startswith("--output=")]
    if merge is not None:
        files = re.findall(r"^            - (/results/\S+-shard-\d+\.json)$", merge, re.M)
        want = [out[0].split("=", 1)[1].replace("$(SHARD_INDEX)", str(i)) for i in range(int(shards))] if out else []
        if files != want:
            problems.append(f"the merge Job reads {files}, the shards write {want}")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"ok: {value_set}: the Jobs agree (shards, --start-at, result files)")
EOF
    done
done
if [ "$failures" -gt 0 ]; then
    echo "check-helm: $failures check(s) failed"
    exit 1
fi
echo "check-helm: chart lints; every rendered manifest of ${#value_sets[@]} value set(s) validates strictly for Kubernetes ${versions[*]}"
