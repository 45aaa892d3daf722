"""The README's "Using it" examples, run as written against the mesh that `make test` started (its `make up` line
is what started it), and the HTTP API's handling of bodies that do not say they are JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[3]


def readme_commands() -> list[str]:
    """Every command of the bash blocks of "Using it" (its subsections included), in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Using it", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    commands, current = [], ""
    for line in "".join(blocks).splitlines():
        current += line.rstrip("\\").rstrip() + " " if line.rstrip().endswith("\\") else line
        if not line.rstrip().endswith("\\"):
            if current.strip():
                commands.append(current.strip())
            current = ""
    return commands


def test_every_example_of_using_it_runs_as_written(api_keys):
    commands = readme_commands()
    assert commands[0] == "make up" and any(c.startswith("curl ") for c in commands)
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    outputs = []
    for command in commands[1:]:
        result = subprocess.run(["bash", "-c", f"set -eo pipefail; export RAGLINE_API_KEY=ragline-dev-key; {command}"],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        outputs.append((command, result.stdout))
    answers = {cmd: out for cmd, out in outputs if "ragline ask" in cmd or cmd.startswith("curl")}
    for command, out in answers.items():
        if "/v1/documents" in command:
            assert json.loads(out)["documents_failed"] == 0, out
        elif "--json" in command or command.startswith("curl"):
            answer = json.loads(out)
            assert "error" not in answer and answer["citations"] and not answer.get("not_found"), out
        else:
            assert "Sources:" in out, out
            if "全量备份" in command:
                assert "(backup-manual.pdf, p. 2)" in out, out


def test_a_json_body_that_does_not_say_so_is_read_as_json_and_anything_else_is_refused_with_the_reason(gateway):
    body = json.dumps({"query": "What is the default connectionTimeout of HikariCP?", "strategy": "standard"})
    for content_type in (None, "application/x-www-form-urlencoded", "text/plain"):
        headers = {"Content-Type": content_type} if content_type else {}
        resp = gateway.post("/v1/answer", content=body, headers=headers)
        assert resp.status_code == 200 and "30 seconds" in resp.json()["text"], resp.text
    bad = gateway.post("/v1/answer", content="query=pools", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert bad.status_code == 400 and "application/json" in bad.json()["error"]["message"]
    xml = gateway.post("/v1/answer", content="<query/>", headers={"Content-Type": "application/xml"})
    assert xml.status_code == 415 and "application/json" in xml.json()["error"]["message"]
    assert httpx.post(f"{gateway.base_url}/v1/answer", content=body).status_code == 401
