"""Generated code must match the protos: `make protos` regenerates it."""

import filecmp
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_fresh(tmp_path):
    protos = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "protos" / "ragline" / "v1").glob("*.proto"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-Iprotos", f"--python_out={tmp_path}", f"--grpc_python_out={tmp_path}",
         f"--mypy_out={tmp_path}", f"--mypy_grpc_out={tmp_path}", *protos],
        cwd=ROOT, env=env, check=True,
    )
    fresh = tmp_path / "ragline" / "v1"
    generated = sorted(p.name for p in fresh.iterdir())
    committed = sorted(p.name for p in (ROOT / "ragline" / "v1").iterdir() if p.name != "__init__.py" and p.is_file())
    assert generated == committed, "run `make protos`"
    _, mismatch, errors = filecmp.cmpfiles(fresh, ROOT / "ragline" / "v1", generated, shallow=False)
    assert not mismatch and not errors, f"stale generated code {mismatch}: run `make protos`"
