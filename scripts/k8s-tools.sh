#!/usr/bin/env bash
# Installs the pinned tools the chart validation uses (scripts/k8s-validate.sh) into
# ~/.cache/recap, outside the clone, so they survive `git clean` and are shared by runs.
#   helm, kubeconform, kube-score: built from the Go module proxy (`go install`), one at a time
#   Kubernetes JSON schemas: the kubernetes-validate wheel from PyPI bundles them; kubeconform
#   reads them from disk, so validation never downloads a schema.
# Each step is skipped when its output is already there at the pinned version.
# Prints the directory holding the binaries (nothing with -q); the schemas are in
# $CACHE/k8s/schemas/<kubernetes-validate version>/v<kubernetes version>-local[-strict]/.
set -euo pipefail

HELM_VERSION=v3.21.4
KUBECONFORM_VERSION=v0.7.0
KUBE_SCORE_VERSION=v1.20.0
KUBERNETES_VALIDATE_VERSION=1.37.0
KUBERNETES_VALIDATE_SHA256=85136d018a27b50ec7fc049d902bfa5193f5976807e6c0f408e3ab6fe078cad9
# Kubernetes versions whose schemas are extracted: the oldest the chart supports
# (Chart.yaml kubeVersion) and the newest the wheel bundles (1.25-1.37 are inside).
K8S_SCHEMA_VERSIONS=(1.30.0 1.37.0)

CACHE="${RECAP_K8S_CACHE:-$HOME/.cache/recap}"
BIN="$CACHE/bin"
SCHEMAS="$CACHE/k8s/schemas"
mkdir -p "$BIN" "$CACHE/k8s"

log() { echo "k8s-tools: $*" >&2; }

# go_tool <binary> <package> <version>: install with `go install` unless the stamp says
# this exact version is already there.
go_tool() {
  local name=$1 pkg=$2 version=$3 stamp="$BIN/.$1.version"
  if [[ -x "$BIN/$name" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
    return
  fi
  command -v go >/dev/null || { log "go is required to install $name"; exit 1; }
  log "installing $name $version (go install, this compiles for a while)"
  local ldflags=""
  case $name in
    helm) ldflags="-X helm.sh/helm/v3/internal/version.version=$version" ;;
    kubeconform) ldflags="-X main.version=$version" ;;
    kube-score) ldflags="-X main.version=${version#v}" ;;
  esac
  GOBIN="$BIN" GOFLAGS="-buildvcs=false" CGO_ENABLED=0 \
    go install -ldflags "$ldflags" "$pkg@$version"
  echo "$version" >"$stamp"
}

go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION"
go_tool kube-score github.com/zegl/kube-score/cmd/kube-score "$KUBE_SCORE_VERSION"

# Kubernetes JSON schemas, from the kubernetes-validate wheel (PyPI), hash-pinned.
# The wheel's schemas carry `$id: https://kubernetes.io/api/...` and refer to
# `/api/_definitions.json`, resolved by that package's own loader. kubeconform resolves
# `$ref` against the schema file, so each schema is rewritten without `$id` and with a
# relative `_definitions.json` reference: the same content, resolvable from disk.
install_schemas() {
  local dest="$SCHEMAS/$KUBERNETES_VALIDATE_VERSION"
  [[ -f "$dest/.complete" ]] && return
  command -v python3 >/dev/null || { log "python3 is required to fetch the Kubernetes schemas"; exit 1; }
  log "fetching Kubernetes JSON schemas (kubernetes-validate $KUBERNETES_VALIDATE_VERSION from PyPI)"
  local wheels="$CACHE/k8s/wheels" requirements
  mkdir -p "$wheels"
  requirements=$(mktemp)
  trap 'rm -f "$requirements"' RETURN
  echo "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION --hash=sha256:$KUBERNETES_VALIDATE_SHA256" >"$requirements"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --require-hashes -r "$requirements" --dest "$wheels" >&2
  rm -rf "$dest.partial"
  python3 - "$wheels/kubernetes_validate-$KUBERNETES_VALIDATE_VERSION-py3-none-any.whl" "$dest.partial" "${K8S_SCHEMA_VERSIONS[@]}" <<'PY'
import json, os, sys, zipfile

wheel, dest, versions = sys.argv[1], sys.argv[2], sys.argv[3:]
prefix = "kubernetes_validate/kubernetes-json-schema/"
wanted = {f"v{version}-local-strict" for version in versions}
found = set()

def relative_refs(node):
    if isinstance(node, dict):
        return {key: (value.replace("/api/_definitions.json", "_definitions.json", 1)
                      if key == "$ref" and isinstance(value, str) else relative_refs(value))
                for key, value in node.items()}
    if isinstance(node, list):
        return [relative_refs(item) for item in node]
    return node

with zipfile.ZipFile(wheel) as archive:
    for name in archive.namelist():
        if not name.startswith(prefix) or not name.endswith(".json"):
            continue
        version_dir, _, file_name = name[len(prefix):].partition("/")
        if version_dir not in wanted or "/" in file_name:
            continue
        found.add(version_dir)
        schema = json.loads(archive.read(name))
        schema.pop("$id", None)
        os.makedirs(os.path.join(dest, version_dir), exist_ok=True)
        with open(os.path.join(dest, version_dir, file_name), "w") as out:
            json.dump(relative_refs(schema), out)
missing = wanted - found
if missing:
    sys.exit(f"the wheel has no schemas for {sorted(missing)}")
PY
  touch "$dest.partial/.complete"
  rm -rf "$dest"
  mv "$dest.partial" "$dest"
}
install_schemas

[[ ${1:-} == -q ]] || echo "$BIN"
