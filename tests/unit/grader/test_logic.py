"""The offline grader's lexical scores."""

from ragline.v1 import common_pb2
from services.grader.logic import relevance, support, usefulness


def chunk(cid: str, text: str, title: str = "t") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=cid, document_id=f"d-{cid}", title=title, text=text), score=1.0)


def test_grader_scores():
    assert relevance("HikariCP pool size", "Pools", "HikariCP default pool size is 10") == 1.0
    assert relevance("HikariCP pool size", "Cats", "cats sleep") == 0.0
    assert support("The pool size is 10 [1]", ["HikariCP default pool size is 10"]) == 1.0
    assert support("The moon is made of cheese", ["HikariCP default pool size is 10"]) < 0.5
    assert usefulness("pool size", "") == 0.0
