"""A search request's arguments: the tenant's alpha, and what is refused before Weaviate is asked."""

import pydantic
import pytest

from ragline.v1 import retrieval_pb2
from services.retrieval.config import RetrievalSettings
from services.retrieval.search import InvalidArgument, search_args


def test_alpha_per_tenant_overrides_the_default_but_not_the_request(monkeypatch):
    monkeypatch.setenv("RAGLINE_RETRIEVAL_TENANT_ALPHA", '{"entities": 0.95}')
    settings = RetrievalSettings()
    alpha_of = lambda **kw: search_args(retrieval_pb2.SearchRequest(query="q", **kw), settings).alpha  # noqa: E731
    assert alpha_of(tenant="entities") == 0.95
    assert alpha_of(tenant="other") == settings.default_alpha
    assert alpha_of(tenant="entities", alpha=0.2) == 0.2
    monkeypatch.setenv("RAGLINE_RETRIEVAL_TENANT_ALPHA", '{"entities": 1.5}')
    with pytest.raises(pydantic.ValidationError, match="within"):
        RetrievalSettings()


@pytest.mark.parametrize(("request_fields", "message"), [
    ({"tenant": "bad tenant!", "query": "q"}, "bad tenant name"),
    ({"tenant": "t", "query": "  "}, "query is empty"),
    ({"tenant": "t", "query": "q" * 4001}, "the limit is 4000"),
    ({"tenant": "t", "query": "q", "limit": 500}, "limit must be within"),
    ({"tenant": "t", "query": "q", "fusion": 7}, "unknown fusion type 7"),
    ({"tenant": "t", "query": "q", "query_properties": [retrieval_pb2.QueryProperty(name="secret")]}, "unknown query property"),
    ({"tenant": "t", "query": "q", "filters": [{"field": "lang"}]}, "needs a field and at least one value"),
    ({"tenant": "t", "query": "q", "query_properties": [retrieval_pb2.QueryProperty(name="text"),
                                                        retrieval_pb2.QueryProperty(name="text_en")]}, "not both"),
])
def test_bad_searches_are_refused_with_the_reason(request_fields, message):
    with pytest.raises(InvalidArgument, match=message):
        search_args(retrieval_pb2.SearchRequest(**request_fields), RetrievalSettings())


def test_a_good_search_keeps_its_boosts_filters_and_fusion():
    args = search_args(retrieval_pb2.SearchRequest(
        tenant="t", query="redis", limit=7, fusion=retrieval_pb2.FUSION_TYPE_RANKED,
        query_properties=[retrieval_pb2.QueryProperty(name="title", boost=2), retrieval_pb2.QueryProperty(name="text")],
        filters=[{"field": "lang", "values": ["zh"]}, {"field": "lang", "values": ["en"]}]), RetrievalSettings())
    assert (args.limit, args.fusion, args.properties, args.filters) == (7, "ranked", ["title^2", "text"], {"lang": ["zh", "en"]})


def test_the_default_search_reads_the_analysed_copies_with_the_title_boost():
    args = search_args(retrieval_pb2.SearchRequest(tenant="t", query="redis"), RetrievalSettings(bm25_title_boost=2))
    assert args.properties == ["title_en^2", "text_en", "title_zh^2", "text_zh"]


def test_without_an_alpha_the_question_language_chooses_the_default_and_a_tenant_its_own():
    settings = RetrievalSettings(default_alpha=0.8, default_alpha_zh=0.5, tenant_alpha={"docs": 0.3})
    ask = lambda tenant, query: search_args(retrieval_pb2.SearchRequest(tenant=tenant, query=query), settings).alpha  # noqa: E731
    assert ask("t", "How do I configure the connection pool?") == 0.8
    assert ask("t", "数据库连接池怎么配") == 0.5
    assert ask("docs", "数据库连接池怎么配") == 0.3
    assert search_args(retrieval_pb2.SearchRequest(tenant="docs", query="q", alpha=1.0), settings).alpha == 1.0
