#!/usr/bin/env bash
# The README's test command: set up, start everything the tests need, run pytest, and always stop it all.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check --quiet . && echo "ruff: clean"
# The tests use their own tenants through these keys (tests/conftest.py reads the same variable).
export RAGLINE_API_KEYS="${RAGLINE_API_KEYS:-ragline-dev-key:default,test-key-a:tests_a,test-key-b:tests_b,test-key-c:tests_c,test-key-hr:tests_groups:hr,test-key-eng:tests_groups:eng,test-key-both:tests_groups:hr|eng,test-key-plain:tests_groups,test-key-docs:tests_docs,test-key-sync:tests_sync,test-key-fuzz:tests_fuzz,test-key-iso-1:tests_iso_1,test-key-iso-2:tests_iso_2}"
# The mesh tests' corpus tenant has the demo glossary, as `make up`'s default tenant does.
glossaries='{"default": "examples/glossary.txt", "tests_a": "examples/glossary.txt"}'
export RAGLINE_GLOSSARIES="${RAGLINE_GLOSSARIES:-$glossaries}"
# Tests start from an empty Weaviate of their own; the data of `make up` is left alone.
export RAGLINE_WEAVIATE_DATA="$PWD/.run/weaviate-test-data"
# The local model server runs beside the mesh (the stages stay offline): tests/integration/mesh/test_local_model.py
# points stage processes of its own at it.
export RAGLINE_LOCAL_LLM="${RAGLINE_LOCAL_LLM:-server}"
# Every process the tests start shares the checkout's caches, as `make up`'s do.
export RAGLINE_CACHE_DIR="${RAGLINE_CACHE_DIR:-$PWD/.cache}"
rm -rf "$RAGLINE_WEAVIATE_DATA"
stop() { .venv/bin/python -m ragline.dev.stack down || true; }
trap stop EXIT
# A stale stack from an interrupted run would hold the ports.
.venv/bin/python -m ragline.dev.stack down >/dev/null 2>&1 || true
.venv/bin/python -m ragline.dev.stack up
.venv/bin/python -m pytest -p no:cacheprovider "$@"
