"""The protos pass buf's lint (buf is built from its Go module by `make setup`, so this is not a unit test)."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_protos_pass_buf_lint():
    buf = ROOT / "bin" / "buf"
    assert buf.exists(), "bin/buf is missing: run `make setup`"
    result = subprocess.run([str(buf), "lint"], cwd=ROOT / "protos", capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
