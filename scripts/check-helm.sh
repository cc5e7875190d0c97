#!/usr/bin/env bash
# Offline checks of the Helm chart deploy/helm/ozone-dn-lab (no cluster runs here):
# - `helm lint` (default values, and strict with each values file of the chart's ci/ folder);
# - `helm template` with the default values and with each ci/*-values.yaml (ServiceMonitor on,
#   external targets without dn-sim, …), for two Kubernetes versions (KUBE_VERSIONS);
# - every rendered manifest validated strictly (unknown fields are errors) against that
#   version's schemas, with PyPI's kubernetes-validate (it ships the schemas of Kubernetes
#   1.25-1.37), and a second opinion from kubeconform v0.8.0 (a Go module) on the same schema
#   files; every object must have passed, none may be left without a schema, except:
# - the Prometheus Operator's ServiceMonitor, a CRD in no Kubernetes schema: it is decoded
#   strictly into the operator's own Go API types (scripts/helm-check/servicemonitor, a Go
#   module from the Go module proxy) instead;
# - that both checkers reject a manifest with an unknown field (so their passes mean something);
# - the consistency the chart relies on: the loadgen Job's arguments hold the chart's own
#   files/loadgen-args (what scripts/shards-local.sh runs), the merge Job names the same result
#   files the shards write, and one --start-at for all.
# Tools are installed on first use under target/tools, in parallel (helm: `go install helm.sh/
# helm/v3/cmd/helm@v3.22.0`, about 2.5 min on 2 cores the first time, seconds once Go's own caches
# hold its modules and packages; kubernetes-validate in a venv), so a second run is fast.
# Exit: 0 all pass; 1 a check failed or a tool could not be installed with its registry in
# reach; 3 a tool could not be installed and a probe finds its registry out of reach.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

# python3 -m venv needs Debian's python3-venv where python3 is Debian's; curl runs the probes.
ensure_debian_packages python3-venv curl
# Go where the machine image keeps it, in case PATH does not name it.
[ -x /usr/local/go/bin/go ] && PATH=$PATH:/usr/local/go/bin

chart=deploy/helm/ozone-dn-lab
versions=(${KUBE_VERSIONS:-1.30.0 1.34.0})
tools=$PWD/target/tools
mkdir -p "$tools/bin"
# The binaries go to target/tools/bin; Go's module and build caches stay where Go keeps them for
# this user (GOMODCACHE, GOCACHE), so that a fresh checkout (CI's) links helm in seconds.
export GOBIN=$tools/bin GOFLAGS=-modcacherw
helm=$tools/bin/helm
kv=$tools/kv-venv/bin/kubernetes-validate
sm_check=$tools/bin/servicemonitor-check
sm_src=scripts/helm-check/servicemonitor
sm_stamp=$(cat "$sm_src"/go.mod "$sm_src"/go.sum "$sm_src"/main.go | sha256sum | cut -c1-16)

# The three tools, built or installed at once (two Go builds and a pip install in parallel).
need_go=false
[ -x "$helm" ] && [ -x "$tools/bin/kubeconform" ] || need_go=true
[ -x "$sm_check" ] && [ "$(cat "$tools/servicemonitor-check.stamp" 2>/dev/null)" = "$sm_stamp" ] || need_go=true
if $need_go && ! command -v go >/dev/null; then
    echo "check-helm: no Go toolchain to build helm and the ServiceMonitor checker with" >&2
    exit 1
fi
if [ ! -x "$helm" ]; then
    echo "installing helm v3.22.0 (go install, once; cached in target/tools)..."
    nice go install helm.sh/helm/v3/cmd/helm@v3.22.0 >"$tools/helm-install.log" 2>&1 &
    helm_job=$!
fi
if [ ! -x "$sm_check" ] || [ "$(cat "$tools/servicemonitor-check.stamp" 2>/dev/null)" != "$sm_stamp" ]; then
    echo "building the ServiceMonitor checker (once; cached in target/tools)..."
    (cd "$sm_src" && nice go build -o "$sm_check" .) >"$tools/sm-build.log" 2>&1 &
    sm_job=$!
fi
kubeconform=$tools/bin/kubeconform
if [ ! -x "$kubeconform" ]; then
    echo "installing kubeconform v0.8.0 (go install, once; cached in target/tools)..."
    nice go install github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0 >"$tools/kubeconform-install.log" 2>&1 &
    kubeconform_job=$!
fi
if [ ! -x "$kv" ]; then
    echo "installing kubernetes-validate 1.37.0 (PyPI, in a venv under target/tools)..."
    { python3 -m venv "$tools/kv-venv" && "$tools/kv-venv/bin/pip" install -q kubernetes-validate==1.37.0; } \
        >"$tools/kv-install.log" 2>&1 &
    kv_job=$!
fi
# install_failed WHAT LOG PROBE REGISTRY: exit 3 when the registry is out of reach, else 1.
install_failed() {
    if ! "$3"; then
        echo "check-helm: $1 could not be installed and $4 is out of reach (probe failed)" >&2
        exit 3
    fi
    tail -20 "$2" >&2
    echo "check-helm: $1 could not be installed with $4 in reach (log above)" >&2
    exit 1
}
if [ -n "${helm_job:-}" ] && ! wait "$helm_job"; then
    install_failed helm "$tools/helm-install.log" go_proxy_reachable "the Go module proxy"
fi
if [ -n "${kubeconform_job:-}" ] && ! wait "$kubeconform_job"; then
    install_failed kubeconform "$tools/kubeconform-install.log" go_proxy_reachable "the Go module proxy"
fi
if [ -n "${sm_job:-}" ]; then
    wait "$sm_job" || install_failed "the ServiceMonitor checker" "$tools/sm-build.log" go_proxy_reachable "the Go module proxy"
    echo "$sm_stamp" >"$tools/servicemonitor-check.stamp"
fi
if [ -n "${kv_job:-}" ] && ! wait "$kv_job"; then
    rm -rf "$tools/kv-venv"
    install_failed kubernetes-validate "$tools/kv-install.log" pypi_reachable PyPI
fi
# kubeconform reads the same schemas once their "/api/_definitions.json#" references point at
# the files (kept per version in target/tools/kubeconform-schemas).
kv_schemas=$(ls -d "$tools"/kv-venv/lib/python3*/site-packages/kubernetes_validate/kubernetes-json-schema)
for v in "${versions[@]}"; do
    dir=$tools/kubeconform-schemas/v$v
    [ -f "$dir/_definitions.json" ] && continue
    [ -d "$kv_schemas/v$v-local-strict" ] || { echo "check-helm: kubernetes-validate has no schemas for $v" >&2; exit 1; }
    mkdir -p "$dir.tmp"
    for f in "$kv_schemas/v$v-local-strict"/*.json; do
        sed "s|\"/api/_definitions.json#|\"file://$dir/_definitions.json#|g" "$f" >"$dir.tmp/${f##*/}"
    done
    mv "$dir.tmp" "$dir"
done
conform() { # VERSION FILE: kubeconform, strict, ServiceMonitor left to its own checker
    "$kubeconform" -strict -summary -skip ServiceMonitor \
        -schema-location "$tools/kubeconform-schemas/v$1/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$2"
}
echo "$("$helm" version --short), kubernetes-validate $("$kv" --version 2>&1 | tail -1), kubeconform v0.8.0"

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
            echo "ok: $set, Kubernetes $v: $passed object(s) valid (strict, kubernetes-validate)$extra"
        fi
        # A second opinion on the same schemas.
        summary=$(conform "$v" "$out" 2>&1 | tail -1 || true)
        if [[ $summary != *"Valid: $((objects - monitors)), Invalid: 0, Errors: 0, Skipped: $monitors"* ]]; then
            conform "$v" "$out" || true
            fail "kubeconform ($set, Kubernetes $v): $summary"
        else
            echo "ok: $set, Kubernetes $v: kubeconform: $summary"
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
# dnSim.scm (set in ci/full-values.yaml alone) becomes dn-sim's --scm.
sts = next((d for d in docs if re.search(r"^kind: StatefulSet$", d, re.M)), None)
if sts is not None and ("- --scm=" in sts) != value_set.endswith("full-values.yaml"):
    problems.append(f"dn-sim's --scm is {'missing' if value_set.endswith('full-values.yaml') else 'set'} with {value_set} values")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"ok: {value_set}: the Jobs agree (shards, --start-at, result files)")
EOF
    done
done
# The checkers themselves must reject what is wrong, or their passes mean nothing: an unknown
# field in the StatefulSet, a misspelled field in the ServiceMonitor.
"$helm" template lab "$chart" --kube-version "${versions[-1]}" -f "$chart/ci/full-values.yaml" >"$work/full.yaml"
sed 's/^  podManagementPolicy: Parallel$/  podManagementPolicy: Parallel\n  replicaz: 3/' "$work/full.yaml" >"$work/broken.yaml"
if ! grep -q replicaz "$work/broken.yaml" || "$kv" -k "${versions[-1]}" --strict --quiet "$work/broken.yaml" >/dev/null 2>&1; then
    fail "kubernetes-validate --strict accepted an unknown field (or the test could not inject one)"
fi
if conform "${versions[-1]}" "$work/broken.yaml" >/dev/null 2>&1; then
    fail "kubeconform -strict accepted an unknown field"
fi
sed 's/^      path: \/prom$/      pathh: \/prom/' "$work/full.yaml" >"$work/broken-sm.yaml"
if ! grep -q pathh "$work/broken-sm.yaml" || "$sm_check" <"$work/broken-sm.yaml" >/dev/null 2>&1; then
    fail "the ServiceMonitor checker accepted a misspelled field (or the test could not inject one)"
fi

if [ "$failures" -gt 0 ]; then
    echo "check-helm: $failures check(s) failed"
    exit 1
fi
echo "check-helm: chart lints; every rendered manifest of ${#value_sets[@]} value set(s) validates strictly for Kubernetes ${versions[*]}"
