"""Heuristic decomposition."""

from ragline.domain.decomposition import decompose
from ragline.v1 import common_pb2


def chunk(cid: str, text: str, title: str = "t") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=cid, document_id=f"d-{cid}", title=title, text=text), score=1.0)


def test_decompose_comparisons_and_conjunctions():
    subs, kind = decompose("Compare HikariCP and c3p0 in startup time", 3)
    assert kind == "comparison" and [s for s, _ in subs] == ["HikariCP startup time", "c3p0 startup time"]
    subs, kind = decompose("Were Scott Derrickson and Ed Wood of the same nationality?", 3)
    assert kind == "comparison" and len(subs) == 2
    subs, kind = decompose("Who founded the company? When was it founded?", 3)
    assert kind == "conjunction" and len(subs) == 2
    subs, kind = decompose("What is a pool?", 3)
    assert kind == "single" and len(subs) == 1


def test_decompose_respects_the_hop_bound():
    subs, _ = decompose("A? B? C? D? E?", 2)
    assert len(subs) == 2


def test_decompose_keeps_the_question_word_of_a_conjunction():
    subs, kind = decompose("What storage does the payments service use, and why did its pool run out?", 3)
    assert kind == "conjunction"
    assert [s for s, _ in subs] == ["What storage does the payments service use", "why did its pool run out"]
