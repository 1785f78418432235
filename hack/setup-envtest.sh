#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) from their Go modules,
# through the Go module proxy, into a versioned cache outside the work tree, and links
# bin/envtest to it. A second run is instant. Prints the directory for KUBEBUILDER_ASSETS.
#
# No prebuilt binary is downloaded: both come from source, pinned to the versions that
# match the k8s.io libraries controller-runtime pulls in (envtest pairs k8s 1.37 with etcd 3.7).
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-1.37.1}"
ETCD_VERSION="${ETCD_VERSION:-3.7.3}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${JOURNEY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/journey-operator}/envtest/k8s-${KUBE_VERSION}-etcd-${ETCD_VERSION}"
link="$root/bin/envtest"

log() { echo "setup-envtest: $*" >&2; }

link_bin() {
  mkdir -p "$root/bin"
  ln -sfn "$cache" "$link"
  echo "$link"
}

if [[ -x "$cache/kube-apiserver" && -x "$cache/etcd" ]]; then
  link_bin
  exit 0
fi

mkdir -p "$cache"
# Concurrent runs (parallel test packages, several clones) wait for one build.
exec 9>"$cache/.lock"
flock 9
if [[ -x "$cache/kube-apiserver" && -x "$cache/etcd" ]]; then
  link_bin
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# gomod MODULE@VERSION prints the path of that module's go.mod in the module cache.
gomod() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p'; }

# local_replaces GOMOD NEWVERSION turns every `X => ./relative/dir` replace of GOMOD
# into `replace X => X NEWVERSION`, so the wrapper takes published modules instead.
local_replaces() {
  sed -n '/^replace (/,/^)/p' "$1" | awk -v v="$2" '$2 == "=>" && $3 ~ /^\.\.?\// { print "replace " $1 " => " $1 " " v }'
}

build() { # build NAME MODULE PACKAGE VERSION REPLACE_VERSION LDFLAGS
  local name=$1 module=$2 pkg=$3 version=$4 rversion=$5 ldflags=$6
  local dir="$work/$name"
  mkdir -p "$dir"
  log "building $name $version from $module (first run only; several minutes on 2 cores)"
  {
    echo "module local/build-$name"
    echo
    echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')"
    echo
    echo "require $module $version"
    echo
    local_replaces "$(gomod "$module@$version")" "$rversion"
  } >"$dir/go.mod"
  (cd "$dir" && GOFLAGS=-mod=mod go get "$pkg@$version" >/dev/null 2>&1 || true)
  # -dwarf=false: the compiler writes no debug information, which -s -w would strip at
  # link time anyway; the binary is the same, built with less work.
  (cd "$dir" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" -o "$cache/$name.tmp" "$pkg")
  mv "$cache/$name.tmp" "$cache/$name"
}

# The two builds run at the same time: each has stretches that keep one core busy (the
# link, long chains of packages) or none (downloading modules), which the other fills.
pids=()
if [[ ! -x "$cache/etcd" ]]; then
  build etcd go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 "v$ETCD_VERSION" "v$ETCD_VERSION" \
    "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$ETCD_VERSION" &
  pids+=($!)
fi

if [[ ! -x "$cache/kube-apiserver" ]]; then
  minor="${KUBE_VERSION#*.}"; minor="${minor%%.*}"
  vpkg=k8s.io/component-base/version
  build kube-apiserver k8s.io/kubernetes k8s.io/kubernetes/cmd/kube-apiserver "v$KUBE_VERSION" "v0.${KUBE_VERSION#*.}" \
    "-s -w -X $vpkg.gitVersion=v$KUBE_VERSION -X $vpkg.gitMajor=${KUBE_VERSION%%.*} -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean" &
  pids+=($!)
fi
failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
if (( failed )); then
  log "building the control plane failed (see above)"
  exit 1
fi

# kubectl is optional for envtest; use the machine's when it has one.
if [[ ! -e "$cache/kubectl" ]] && command -v kubectl >/dev/null 2>&1; then
  ln -sf "$(command -v kubectl)" "$cache/kubectl"
fi

link_bin
