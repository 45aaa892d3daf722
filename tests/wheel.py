"""Building the wheel as a release would: from a copy of what git tracks, so that no build/ folder of an earlier
build and no untracked file can reach it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = {"pyproject.toml", "README.md", "ragline", "services", "gateway"}


def build_wheel(dest: Path) -> Path:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    source = dest / "source"
    for name in tracked:
        if name.split("/")[0] in PACKAGED:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(source), "-w", str(dest)],
                   check=True, cwd=dest)
    (wheel,) = dest.glob("ragline-*.whl")
    return wheel
