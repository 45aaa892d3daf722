#!/usr/bin/env bash
# Idempotent, cached set-up: Python venv with pinned dependencies, Weaviate and Jaeger built from
# their Go modules into bin/, Redis from Debian. A second run on the same machine takes seconds.
# Parts: `setup.sh` (everything), `setup.sh python` (the venv only: unit tests), `setup.sh python buf` (lint),
# `setup.sh llm` (the local model server).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

WEAVIATE_VERSION=v1.39.0
BUF_VERSION=v1.75.0
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3

step() { printf '\n==> %s\n' "$*"; }
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

PARTS=${*:-python weaviate jaeger buf kubernetes redis llm}
want() { [[ " $PARTS " == *" $1 "* ]]; }

mkdir -p bin .run

# --- Python -------------------------------------------------------------------------------
lock_sum=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if want python; then
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
if stamp_ok .venv/.ragline-lock "$lock_sum"; then
  echo "python dependencies: up to date"
else
  step "installing pinned Python dependencies (cached in pip's cache)"
  .venv/bin/pip install --disable-pip-version-check -q -r requirements.lock
  .venv/bin/pip install --disable-pip-version-check -q --no-deps -e .
  echo "$lock_sum" > .venv/.ragline-lock
fi
fi

# --- Weaviate -----------------------------------------------------------------------------
# No -trimpath and the module cache is kept: the gse_ch tokenizer reads its dictionaries from
# the gse module's source folder at run time.
if want weaviate; then
if stamp_ok bin/.weaviate-version "$WEAVIATE_VERSION" && [ -x bin/weaviate-server ]; then
  echo "weaviate $WEAVIATE_VERSION: built"
else
  step "building weaviate-server $WEAVIATE_VERSION from its Go module (first build takes several minutes)"
  GOBIN="$ROOT/bin" CGO_ENABLED=0 go install "github.com/weaviate/weaviate/cmd/weaviate-server@$WEAVIATE_VERSION"
  echo "$WEAVIATE_VERSION" > bin/.weaviate-version
fi
fi

# --- Jaeger v2 ----------------------------------------------------------------------------
if want jaeger; then
jaeger_sum=$(cat deploy/jaeger/go.mod deploy/jaeger/go.sum | sha256sum | cut -d' ' -f1)
if stamp_ok bin/.jaeger-version "$jaeger_sum" && [ -x bin/jaeger ]; then
  echo "jaeger: built"
else
  step "building jaeger v2 from its Go module (first build takes several minutes)"
  (cd deploy/jaeger && CGO_ENABLED=0 go build -o "$ROOT/bin/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger)
  echo "$jaeger_sum" > bin/.jaeger-version
fi
fi

# --- buf (protobuf linter) -----------------------------------------------------------------
if want buf; then
if stamp_ok bin/.buf-version "$BUF_VERSION" && [ -x bin/buf ]; then
  echo "buf $BUF_VERSION: built"
else
  step "building buf $BUF_VERSION from its Go module"
  GOBIN="$ROOT/bin" CGO_ENABLED=0 go install "github.com/bufbuild/buf/cmd/buf@$BUF_VERSION"
  echo "$BUF_VERSION" > bin/.buf-version
fi
fi

# --- Kubernetes manifest test (kustomize's Go API and the Kubernetes API types) ----------------
if want kubernetes; then
  k8s_sum=$(cat deploy/kubernetes/go.mod deploy/kubernetes/go.sum | sha256sum | cut -d' ' -f1)
  if stamp_ok bin/.kubernetes-modules "$k8s_sum"; then
    echo "kubernetes test modules: downloaded"
  else
    step "downloading the Kubernetes manifest test's Go modules (kustomize, k8s.io/api)"
    (cd deploy/kubernetes && GOTOOLCHAIN=local go mod download)
    echo "$k8s_sum" > bin/.kubernetes-modules
  fi
fi

# --- Local model server (llama-cpp-python, SmolLM2-135M) ---------------------------------------
# Built from source with portable CPU flags: a build for the build machine's own CPU (the default) can crash on
# another's, and llama.cpp's native build segfaults on this kind of machine. The wheel is kept in the user's cache,
# outside any checkout, keyed by version and flags, so a fresh clone reuses it (the first build takes ~6 minutes).
LLAMA_VERSION=0.3.36
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX_VNNI=OFF"
if want llm; then
  llm_sum=$(printf '%s %s ' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" | cat - requirements-llm.lock | sha256sum | cut -d' ' -f1)
  if stamp_ok .venv-llm/.ragline-llm "$llm_sum"; then
    echo "local model server: installed"
  else
    wheels="${XDG_CACHE_HOME:-$HOME/.cache}/ragline/wheels/llama-cpp-python-$LLAMA_VERSION-${llm_sum:0:12}"
    if ! ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
      step "building llama-cpp-python $LLAMA_VERSION with portable CPU flags (first build takes several minutes)"
      [ -x .venv-llm/bin/python ] || "$PYTHON" -m venv .venv-llm
      mkdir -p "$wheels.tmp"
      CMAKE_ARGS="$LLAMA_CMAKE_ARGS" .venv-llm/bin/pip wheel --disable-pip-version-check -q --no-deps --no-cache-dir \
        -w "$wheels.tmp" "llama-cpp-python==$LLAMA_VERSION"
      rm -rf "$wheels" && mv "$wheels.tmp" "$wheels"
    fi
    step "installing the local model server into .venv-llm"
    [ -x .venv-llm/bin/python ] || "$PYTHON" -m venv .venv-llm
    .venv-llm/bin/pip install --disable-pip-version-check -q -r requirements-llm.lock
    .venv-llm/bin/pip install --disable-pip-version-check -q --no-deps "$wheels"/llama_cpp_python-*.whl
    echo "$llm_sum" > .venv-llm/.ragline-llm
  fi
fi

# --- Redis --------------------------------------------------------------------------------
if ! want redis; then
  :
elif command -v redis-server >/dev/null; then
  echo "redis: $(redis-server --version | cut -d' ' -f3)"
else
  step "installing redis-server from Debian"
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
  # The package starts its own daemon on 6379; ragline runs its own, so stop that one.
  $SUDO systemctl stop redis-server 2>/dev/null || $SUDO service redis-server stop 2>/dev/null || true
fi

step "setup done"
