"""The wheel holds every file a service loads at run time, and no development tooling."""

import zipfile

from tests.wheel import ROOT, build_wheel

RUNTIME_FILES = ["services/router/models/multihop-classifier.json", "services/reranker/models/features-lr.json"]


def test_the_wheel_carries_the_model_files_and_leaves_out_the_dev_tooling(tmp_path):
    names = set(zipfile.ZipFile(build_wheel(tmp_path)).namelist())
    assert all((ROOT / f).is_file() for f in RUNTIME_FILES)
    assert set(RUNTIME_FILES) <= names, f"missing from the wheel: {set(RUNTIME_FILES) - names}"
    assert not any(n.startswith("ragline/dev/") for n in names)
    assert "ragline/domain/glossary.py" in names and "services/orchestrator/flows/adaptive.py" in names
