#!/usr/bin/env bash
# Offline validation of the deployment files (run by `make k8s-validate` and by
# tests/k8s_chart.rs in `make test`):
#   1. helm lint --strict, default values and values-production.yaml
#   2. helm template with both, for Kubernetes 1.30 (the chart's minimum) and 1.37
#   3. kubeconform -strict against the JSON schemas of both versions, read from disk
#   4. kube-score on both renderings, warnings included (the optional checks that fit the
#      chart are switched on; see k8s/recap/README.md for the ones left off and why)
#   5. the dashboard and the alert rules parse, and every metric they use is one the
#      service exports (the list in k8s/recap/README.md, section "Metrics")
# Tools and schemas come from scripts/k8s-tools.sh (cached under ~/.cache/recap); nothing
# is downloaded once they are there. Renderings are left in $RECAP_K8S_OUT (default: a
# temporary directory) for whoever wants to read them.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
chart="$root/k8s/recap"
bin=$("$root/scripts/k8s-tools.sh")
cache="${RECAP_K8S_CACHE:-$HOME/.cache/recap}"
schemas=$(ls -d "$cache"/k8s/schemas/*/ | head -n1)
helm="$bin/helm"
kubeconform="$bin/kubeconform"
kube_score="$bin/kube-score"

out="${RECAP_K8S_OUT:-}"
if [[ -z "$out" ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
# helm keeps a repository cache and config; keep them out of $HOME's defaults.
export HELM_CACHE_HOME="$out/helm-cache" HELM_CONFIG_HOME="$out/helm-config" HELM_DATA_HOME="$out/helm-data"

kube_versions=(1.30.0 1.37.0)
# The two value sets: the chart's defaults, and the production example with the alert
# rules deployed as a PrometheusRule (which also parses k8s/alerts/recap-rules.yaml).
values_args() {
  case $1 in
    default) ;;
    production) echo "-f $chart/values-production.yaml --set metrics.prometheusRule.enabled=true --set-file metrics.prometheusRule.rules=$root/k8s/alerts/recap-rules.yaml" ;;
  esac
}

step() { echo "== $*"; }

step "helm lint"
for name in default production; do
  read -r -a args <<<"$(values_args "$name")"
  "$helm" lint "$chart" --strict --quiet --kube-version "${kube_versions[0]}" "${args[@]}"
  echo "helm lint ($name values): ok"
done

step "helm template + kubeconform -strict"
for name in default production; do
  read -r -a args <<<"$(values_args "$name")"
  for version in "${kube_versions[@]}"; do
    rendered="$out/$name-$version.yaml"
    "$helm" template recap "$chart" --namespace recap --kube-version "$version" "${args[@]}" >"$rendered"
    # ServiceMonitor and PrometheusRule are Prometheus Operator CRDs: no schema in the core set.
    "$kubeconform" -strict -summary -kubernetes-version "$version" -skip ServiceMonitor,PrometheusRule \
      -schema-location "$schemas{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
      "$rendered" | sed "s|^Summary:|kubeconform ($name values, Kubernetes $version):|"
  done
done

step "kube-score"
for name in default production; do
  "$kube_score" score "$out/$name-${kube_versions[-1]}.yaml" \
    --output-format ci --exit-one-on-warning \
    --enable-optional-test container-seccomp-profile \
    --enable-optional-test container-ports-check \
    >"$out/kube-score-$name.txt" || { grep -v '^\[OK\]' "$out/kube-score-$name.txt"; exit 1; }
  echo "kube-score ($name values): $(grep -c '^\[OK\]' "$out/kube-score-$name.txt") checks ok, $(grep -c '^\[SKIPPED\]' "$out/kube-score-$name.txt") skipped"
done

step "dashboard and alert rules"
python3 - "$root/k8s/dashboards/recap.json" "$root/k8s/alerts/recap-rules.yaml" "$chart/README.md" <<'PY'
import json, re, sys

dashboard_path, rules_path, readme_path = sys.argv[1:]

# The exported metric names: the README's "Metrics" table, first column.
readme = open(readme_path).read()
section = readme.split("## Metrics", 1)[1].split("\n## ", 1)[0]
documented = set(re.findall(r"^\| `([a-z_:]+)`", section, re.M))
if not documented:
    sys.exit("k8s/recap/README.md: no metric table under '## Metrics'")

def metric_names(expr):
    # Metric names in a PromQL expression: identifiers not followed by '(' (functions),
    # not inside {...} or [...] or quotes, not keywords of the language.
    expr = re.sub(r'"[^"]*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", "{}", expr)
    expr = re.sub(r"\[[^\]]*\]", "[]", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    keywords = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool", "inf", "nan"}
    names = set()
    for match in re.finditer(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr):
        name = match.group(1)
        if name in keywords or re.fullmatch(r"[0-9.e]+", name) or name.startswith("$"):
            continue
        names.add(name)
    return names

def base_name(name):
    # Histogram series are the documented name plus _bucket, _sum or _count.
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in documented:
            return name[: -len(suffix)]
    return name

used = {}
dashboard = json.load(open(dashboard_path))
panels = dashboard["panels"] + [p for row in dashboard["panels"] for p in row.get("panels", [])]
targets = [t for p in panels for t in p.get("targets", [])]
if not targets:
    sys.exit("the dashboard has no queries")
for target in targets:
    for name in metric_names(target["expr"].replace("$__rate_interval", "5m")):
        used.setdefault(base_name(name), set()).add("dashboard")
for template in dashboard.get("templating", {}).get("list", []):
    query = template.get("query")
    if isinstance(query, dict):
        query = query.get("query", "")
    for name in re.findall(r"label_values\(([a-z_:]+)", query or ""):
        used.setdefault(base_name(name), set()).add("dashboard variables")

rules_text = open(rules_path).read()
exprs = re.findall(r"^\s+expr:\s*(\|-?|>-?)?\s*\n?((?:.*\n)*?)(?=^\s+(?:for|labels|annotations|keep_firing_for):)", rules_text, re.M)
alerts = re.findall(r"^\s+- alert:\s*(\S+)", rules_text, re.M)
if not alerts or len(exprs) != len(alerts):
    sys.exit(f"{rules_path}: {len(alerts)} alerts but {len(exprs)} expressions found")
for _, expr in exprs:
    for name in metric_names(expr):
        used.setdefault(base_name(name), set()).add("alerts")
for block in re.split(r"^\s+- alert:", rules_text, flags=re.M)[1:]:
    name = block.split()[0]
    for needed in ("severity:", "summary:", "description:"):
        if needed not in block:
            sys.exit(f"alert {name} has no {needed[:-1]}")

unknown = {name: where for name, where in used.items() if name not in documented}
if unknown:
    sys.exit("metrics used but not in the README's exported list: " + ", ".join(f"{n} ({', '.join(sorted(w))})" for n, w in sorted(unknown.items())))
print(f"dashboard: {len(targets)} queries; alerts: {len(alerts)} rules; metrics used: {', '.join(sorted(used))}")
PY

echo "k8s-validate: ok"
