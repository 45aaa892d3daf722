"""Bridge entities for iterative multi-hop retrieval."""

from ragline.v1 import common_pb2


def chunk(cid: str, text: str, title: str = "t") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=cid, document_id=f"d-{cid}", title=title, text=text), score=1.0)


def test_bridge_entities_name_what_the_question_does_not():
    from services.orchestrator.bridging import bridge_entities

    text = ("The Journal of Psychotherapy Integration is published by the American Psychological Association "
            "on behalf of the Society for the Exploration of Psychotherapy Integration.")
    question = "Who was the first president of the association which published Journal of Psychotherapy Integration?"
    assert bridge_entities(question, text) == ["American Psychological Association",
                                               "Society for the Exploration of Psychotherapy Integration"]
    zh = bridge_entities("支付服务用什么连接池？", "支付服务使用 HikariCP 连接池，事务保存在 PostgreSQL 中。")
    assert "HikariCP" in zh
