"""`ragline eval retrieval` end to end on the mesh: a small BEIR-format set ingested into a fresh tenant, scored per
mode at both fusions with the naive baseline beside, and the tenant removed afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PASSAGES = [
    ("pool", "HikariCP", "HikariCP is a JDBC connection pool. Its maximumPoolSize defaults to ten connections."),
    ("probe", "Kubernetes probes", "A liveness probe restarts a container whose process hangs; a readiness probe gates traffic."),
    ("redis", "Redis failover", "When the Redis primary fails, Sentinel promotes a replica and clients reconnect to it."),
    ("backoff", "CrashLoopBackOff", "Kubernetes restarts a crashing container with an exponential back-off capped at five minutes."),
]
QUERIES = [("q1", "default maximumPoolSize of the HikariCP connection pool", "pool"),
           ("q2", "what happens when the Redis primary fails", "redis"),
           ("q3", "which probe gates traffic to a container", "probe"),
           # Labelled with a passage it does not match: a miss on every side, which --misses must list.
           ("q4", "HikariCP maximumPoolSize connection pool defaults", "backoff")]


def _beir_set(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in PASSAGES))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": text}) + "\n" for q, text, _ in QUERIES))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _, d in QUERIES))
    return folder


def _eval(data: Path, *extra: str) -> dict:
    argv = [sys.executable, "-m", "ragline.cli", "eval", "retrieval", "--format", "beir", "--data", str(data),
            "--modes", "bm25,vector,hybrid", "--json", *extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_eval_retrieval_scores_every_mode_at_both_fusions_beside_the_baseline(tmp_path):
    data = _beir_set(tmp_path / "set")
    relative = _eval(data, "--baseline", "--alpha-sweep", "0.5,1.0", "--misses")
    ranked = _eval(data, "--fusion", "ranked")

    assert relative["fusion"] == "relative" and ranked["fusion"] == "ranked"
    assert relative["n_queries"] == 4 and relative["n_passages"] == 4
    # Three questions name their passage's words and find it first on every side; the fourth cannot score 1.
    for result in (relative, ranked):
        for mode in ("bm25", "vector", "hybrid"):
            assert 0.75 <= result["modes"][mode]["ndcg@10"] < 1.0, (result["fusion"], mode, result["modes"][mode])
    assert [m["question"] for m in relative["hybrid_misses"]] == [QUERIES[3][1]]
    miss = relative["hybrid_misses"][0]
    assert miss["first"] == "pool" and miss["relevant"] == ["backoff"] and miss["rank"] != 1
    assert "hybrid_misses" not in ranked
    assert set(relative["baseline"]) == {"naive bm25", "naive vector", "naive hybrid"}
    assert 0.75 <= relative["baseline"]["naive hybrid"]["ndcg@10"] < 1.0
    # alpha 1.0 is the vector side alone.
    assert relative["alpha_sweep"]["1.0"]["hybrid"] == relative["modes"]["vector"]["ndcg@10"]


def test_eval_retrieval_refuses_an_unknown_fusion(tmp_path):
    argv = [sys.executable, "-m", "ragline.cli", "eval", "retrieval", "--format", "beir", "--data", str(tmp_path),
            "--fusion", "average"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "--fusion" in done.stderr
