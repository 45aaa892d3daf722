"""The wheel holds every file a service loads at run time, and no development tooling."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_FILES = ["services/router/models/multihop-classifier.json", "services/reranker/models/features-lr.json"]


def test_the_wheel_carries_the_model_files_and_leaves_out_the_dev_tooling(tmp_path):
    # Built from a copy of what git tracks, so no build/ folder of an earlier build can add stale files.
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    source = tmp_path / "source"
    for name in tracked:
        if name.split("/")[0] in {"pyproject.toml", "README.md", "ragline", "services", "gateway"}:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(source), "-w", str(tmp_path)],
                   check=True, cwd=tmp_path)
    (wheel,) = tmp_path.glob("ragline-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert all((ROOT / f).is_file() for f in RUNTIME_FILES)
    assert set(RUNTIME_FILES) <= names, f"missing from the wheel: {set(RUNTIME_FILES) - names}"
    assert not any(n.startswith("ragline/dev/") for n in names)
    assert "ragline/domain/glossary.py" in names and "services/orchestrator/flows/adaptive.py" in names
