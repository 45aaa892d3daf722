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
    assert alpha_of(tenant="other") == 0.5
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
