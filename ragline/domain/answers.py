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


def cite(index: int, chunk: common_pb2.Chunk, quote: str) -> common_pb2.Citation:
    """A citation of a chunk, with its place in the document (page, slide, sheet) where its format has one."""
    meta = chunk.metadata
    page, slide = meta.get("page", ""), meta.get("slide", "")
    return common_pb2.Citation(index=index, chunk_id=chunk.id, document_id=chunk.document_id, title=chunk.title,
                               source=chunk.source, quote=quote, page=int(page) if page.isdigit() else 0,
                               slide=int(slide) if slide.isdigit() else 0, sheet=meta.get("sheet", ""))


def place(citation: common_pb2.Citation) -> str:
    """Where a citation points, as a person writes it: 'manual.pdf, p. 12'."""
    where = citation.source or citation.document_id
    if citation.page:
        return f"{where}, p. {citation.page}"
    if citation.slide:
        return f"{where}, slide {citation.slide}"
    return f"{where}, sheet {citation.sheet}" if citation.sheet else where


def quote_lead(chunk: common_pb2.ScoredChunk, max_sentences: int) -> tuple[str, list[common_pb2.Citation]]:
    """The passage's opening sentences, cited as [1]."""
    c = chunk.chunk
    lead = " ".join(sentences(c.text)[:max_sentences]) or c.text[:300]
    return f"{lead} [1]", [cite(1, c, lead)]


def stream_pieces(text: str) -> list[str]:
    """An answer split after each citation marker, so a client sees it a sentence at a time."""
    return [p for p in text.replace("] ", "]\n").split("\n") if p]
