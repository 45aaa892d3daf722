"""The real Weaviate built by `make setup`: self-provided vectors, gse_ch Chinese BM25, word tokenization."""

import uuid

import pytest
import weaviate
from weaviate.classes.config import Configure, DataType, Property, Tokenization
from weaviate.classes.query import MetadataQuery

from tests.integration.conftest import _require


@pytest.fixture
def client():
    _require(8080, "Weaviate")
    with weaviate.connect_to_local(host="127.0.0.1", port=8080, grpc_port=50051) as c:
        yield c


def test_weaviate_is_ready(client):
    assert client.is_ready()
    assert client.get_meta()["version"] == "1.39.0"


def test_chinese_bm25_with_gse_ch_and_english_with_word(client):
    name = f"InfraCheck_{uuid.uuid4().hex[:8]}"
    coll = client.collections.create(
        name,
        vector_config=Configure.Vectors.self_provided(),
        properties=[
            Property(name="body_zh", data_type=DataType.TEXT, tokenization=Tokenization.GSE_CH),
            Property(name="body_en", data_type=DataType.TEXT, tokenization=Tokenization.WORD),
        ],
    )
    try:
        rows = [
            ({"body_zh": "数据库连接池耗尽时请求会排队等待", "body_en": ""}, [1.0, 0.0, 0.0]),
            ({"body_zh": "容器反复退出时会进入重启退避", "body_en": ""}, [0.0, 1.0, 0.0]),
            ({"body_zh": "", "body_en": "Redis outages cause connection timeouts"}, [0.0, 0.0, 1.0]),
        ]
        for props, vector in rows:
            coll.data.insert(props, vector=vector)
        hits = coll.query.bm25(query="连接池", query_properties=["body_zh"], limit=3,
                               return_metadata=MetadataQuery(score=True)).objects
        assert [h.properties["body_zh"] for h in hits] == ["数据库连接池耗尽时请求会排队等待"]
        hits = coll.query.bm25(query="重启", query_properties=["body_zh"], limit=3).objects
        assert [h.properties["body_zh"] for h in hits] == ["容器反复退出时会进入重启退避"]
        hits = coll.query.bm25(query="outages", query_properties=["body_en"], limit=3).objects
        assert [h.properties["body_en"] for h in hits] == ["Redis outages cause connection timeouts"]
        nearest = coll.query.near_vector([0.0, 0.9, 0.1], limit=1).objects[0]
        assert nearest.properties["body_zh"] == "容器反复退出时会进入重启退避"
    finally:
        client.collections.delete(name)
