#!/usr/bin/env python3
"""Static checks of the Grafana provisioning and dashboard, for machines where Grafana cannot run.

- every provisioning file is YAML with apiVersion 1; the datasource is Prometheus with a fixed uid;
- the dashboard is valid JSON with a uid and a title; every panel (rows aside) and every query of
  it names that datasource uid; every query has an expression and a unique refId in its panel;
- every metric an expression reads is one dn-sim exports (its /prom exposition, given as a file);
- writes the expressions, with Grafana's $__ variables replaced, as a Prometheus rules file, so
  that `promtool check rules FILE` parses each one as PromQL.

Usage: check-dashboard.py PROVISIONING_DIR DASHBOARD_JSON EXPOSITION_FILE RULES_OUT
Prints one line per problem and exits 1 when there is any.
"""

import json
import re
import sys
from pathlib import Path

import yaml

GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h"}
# Names in PromQL that are not metrics: functions, aggregations, keywords.
PROMQL_WORDS = {
    "sum", "min", "max", "avg", "count", "rate", "irate", "increase", "histogram_quantile",
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "offset", "bool", "le", "topk", "bottomk", "quantile", "abs", "clamp_min", "clamp_max",
    "delta", "deriv", "time", "vector", "scalar", "label_replace", "absent",
}
# Not dn-sim's: Prometheus's own series for every target.
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}


def exported_metrics(exposition: str) -> set:
    names = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            names.add(name)
            if kind.strip() in ("histogram", "summary"):
                names |= {name + "_bucket", name + "_sum", name + "_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def metrics_in(expr: str) -> set:
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    without_labels = re.sub(r"\{[^}]*\}", "", without_strings)
    without_grouping = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", without_labels)
    without_ranges = re.sub(r"\[[^\]]*\]", "", without_grouping)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_ranges))
    return {w for w in words if w not in PROMQL_WORDS and not re.fullmatch(r"[0-9.e]+", w)}


def main(provisioning: str, dashboard_path: str, exposition_path: str, rules_out: str) -> int:
    problems = []
    uids = set()
    for path in sorted(Path(provisioning).rglob("*.y*ml")):
        doc = yaml.safe_load(path.read_text())
        if not isinstance(doc, dict) or doc.get("apiVersion") != 1:
            problems.append(f"{path}: not a provisioning file with apiVersion: 1")
            continue
        for ds in doc.get("datasources", []):
            if ds.get("type") != "prometheus" or not ds.get("uid") or not ds.get("url"):
                problems.append(f"{path}: datasource {ds.get('name')} needs type prometheus, uid, url")
            uids.add(ds.get("uid"))
        for provider in doc.get("providers", []):
            if provider.get("type") != "file" or not provider.get("options", {}).get("path"):
                problems.append(f"{path}: provider {provider.get('name')} needs type file and options.path")
    if len(uids) != 1:
        problems.append(f"{provisioning}: expected one datasource uid, found {sorted(map(str, uids))}")
    uid = next(iter(uids), None)

    try:
        dashboard = json.loads(Path(dashboard_path).read_text())
    except ValueError as e:
        print(f"{dashboard_path}: not JSON: {e}")
        return 1
    for key in ("uid", "title", "panels"):
        if not dashboard.get(key):
            problems.append(f"{dashboard_path}: no {key}")
    exported = exported_metrics(Path(exposition_path).read_text())
    rules = []
    panels = [p for p in dashboard.get("panels", []) for p in [p, *p.get("panels", [])]]
    panels = [p for p in panels if p.get("type") != "row"]
    for panel in panels:
        where = f"{dashboard_path}: panel '{panel.get('title')}'"
        if (panel.get("datasource") or {}).get("uid") != uid:
            problems.append(f"{where}: datasource is not uid {uid}")
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no queries")
        ref_ids = [t.get("refId") for t in targets]
        if len(set(ref_ids)) != len(ref_ids):
            problems.append(f"{where}: repeated refId {ref_ids}")
        for t in targets:
            if (t.get("datasource") or {}).get("uid") != uid:
                problems.append(f"{where} {t.get('refId')}: datasource is not uid {uid}")
            expr = t.get("expr", "").strip()
            if not expr:
                problems.append(f"{where} {t.get('refId')}: no expression")
                continue
            unknown = metrics_in(expr) - exported - PROMETHEUS_SERIES
            if unknown:
                problems.append(f"{where} {t.get('refId')}: dn-sim exports no {sorted(unknown)}")
            for var, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(var, value)
            rules.append({"record": f"dashboard:panel{panel.get('id')}:{t.get('refId')}", "expr": expr})
    Path(rules_out).write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    for p in problems:
        print(p)
    if not problems:
        print(f"ok: {len(panels)} panels, {len(rules)} queries, all on datasource {uid}, "
              f"every metric exported by dn-sim")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print("usage: check-dashboard.py PROVISIONING_DIR DASHBOARD_JSON EXPOSITION_FILE RULES_OUT")
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
