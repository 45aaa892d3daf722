"""The fixed sentences of an answer, per language, and the ways an answer is quoted or streamed: shared by the
generator and by the orchestrator, which answers the same way when the generator is down."""

from __future__ import annotations

from ragline.domain.text import sentences
from ragline.v1 import common_pb2

NOT_FOUND = {"zh": "文档中没有相关信息。", "en": "The documents do not contain information that answers this question."}
UNCERTAIN = {
    "zh": "（注意：该回答未能被检索到的文档完全支持，请核实。）",
    "en": "(Note: this answer is not fully supported by the retrieved documents; please verify it.)",
}


def quote_lead(chunk: common_pb2.ScoredChunk, max_sentences: int) -> tuple[str, list[common_pb2.Citation]]:
    """The passage's opening sentences, cited as [1]."""
    c = chunk.chunk
    lead = " ".join(sentences(c.text)[:max_sentences]) or c.text[:300]
    return f"{lead} [1]", [common_pb2.Citation(index=1, chunk_id=c.id, document_id=c.document_id, title=c.title,
                                               source=c.source, quote=lead)]


def stream_pieces(text: str) -> list[str]:
    """An answer split after each citation marker, so a client sees it a sentence at a time."""
    return [p for p in text.replace("] ", "]\n").split("\n") if p]
