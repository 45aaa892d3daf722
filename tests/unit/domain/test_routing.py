"""The routing rules (the router's fast path and the orchestrator's fallback)."""

from ragline.domain.routing import route_by_rules
from ragline.v1 import common_pb2


def chunk(cid: str, text: str, title: str = "t") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=cid, document_id=f"d-{cid}", title=title, text=text), score=1.0)


def test_router_rules_cover_each_query_type():
    cases = {
        "你好": common_pb2.QUERY_TYPE_NO_RETRIEVAL,
        "Write a short poem about Redis": common_pb2.QUERY_TYPE_OPEN_CREATIVE,
        "Compare HikariCP and c3p0 in startup time": common_pb2.QUERY_TYPE_COMPLEX_REASONING,
        "存活探针失败是否一定会导致重启？": common_pb2.QUERY_TYPE_NEEDS_VERIFICATION,
        "What is the default pool size of HikariCP?": common_pb2.QUERY_TYPE_SIMPLE_FACT,
        "What storage does the service use, and why did its pool run out?": common_pb2.QUERY_TYPE_COMPLEX_REASONING,
    }
    for query, expected in cases.items():
        assert route_by_rules(query).query_type == expected, query


def test_router_extracts_doc_type_filter_and_intent():
    route = route_by_rules("在运维手册里，Redis 宕机怎么办？")
    assert route.filters == {"doc_type": ["markdown"]}
    assert route.intent == "troubleshoot"
    assert route_by_rules("Where in the source code is the pool size set?").filters == {"doc_type": ["code"]}
    # Words that only look like hints: a ruling class, a function served, the documents in general.
    for query in ("Who was the ruling class ahead of the Normans?", "What function does the liveness probe serve?",
                  "文档中提到的连接池大小是多少？", "当注册中心更换时，代码需不需要进行修改？"):
        assert route_by_rules(query).filters == {}, query
