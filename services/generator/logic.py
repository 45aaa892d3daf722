"""Offline generation: extractive answers with citations, heuristic decomposition, keyword rewriting."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ragline.domain.answers import NOT_FOUND, cite, quote_lead
from ragline.domain.glossary import NO_GLOSSARY, Concept, Glossary, concept_coverage
from ragline.domain.text import detect_language, has_cjk, question_tokens, sentences, tokens
from ragline.v1 import common_pb2

DIRECT_ANSWER = {
    "zh": "你好！我是 ragline，一个基于企业文档的问答助手。请直接提出与文档相关的问题，我会给出带引用的回答。",
    "en": "Hello! I am ragline, an assistant that answers questions from your organisation's documents, with citations. Ask me about them.",
}


@dataclass
class Picked:
    chunk: common_pb2.ScoredChunk
    sentence: str
    score: float
    position: int
    coverage: float


# Said before sentences quoted in the other language, so the reader knows why the answer changes language.
LEAD_IN = {"zh": "文档中的相关内容（原文为英文）：", "en": "From the documents (quoted in Chinese):"}


def _lead_in(query: str, passages: list[common_pb2.ScoredChunk]) -> str:
    """A lead-in in the question's language when every passage quoted is in the other one, else nothing. A question
    with any Chinese in it is Chinese here: one full of product names and numbers still reads as Chinese."""
    if has_cjk(query):
        return "" if any(has_cjk(c.chunk.text) for c in passages) else LEAD_IN["zh"]
    return LEAD_IN["en"] if all(detect_language(c.chunk.text) == "zh" for c in passages) else ""


def _confidently_other_language(chunk: common_pb2.ScoredChunk, lang: str, min_probability: float) -> bool:
    scores = chunk.scores
    return (detect_language(chunk.chunk.text) != lang and scores.HasField("relevance_probability")
            and scores.relevance_probability >= min_probability)


# (question, sentences) -> the cosine similarity of each sentence to the question, in a multilingual embedding.
Similarity = Callable[[str, list[str]], list[float]]


def _by_meaning(query: str, chunk: common_pb2.ScoredChunk, concepts: list[Concept], similarity: Similarity,
                max_sentences: int) -> tuple[str, list[common_pb2.Citation]]:
    """The passage's sentences that best answer the question by meaning (embedding similarity) and by what they
    cover of it, cited as [1], in the passage's order. The best sentence, and those within 0.02 of it, at most
    max_sentences, since similarities across languages are close together."""
    c = chunk.chunk
    options = sentences(c.text) or [c.text]
    scores = [s + concept_coverage(concepts, sent) for s, sent in zip(similarity(query, options), options, strict=True)]
    best = max(scores)
    keep = sorted(sorted(range(len(options)), key=lambda i: scores[i], reverse=True)[:max_sentences])
    chosen = [options[i] for i in keep if scores[i] >= best - 0.02]
    quote = " ".join(chosen)
    return f"{quote} [1]", [cite(1, c, quote)]


def extract_answer(
    query: str, context: list[common_pb2.ScoredChunk], max_sentences: int, min_overlap: float,
    cross_lingual_min_probability: float | None = None, glossary: Glossary = NO_GLOSSARY,
    similarity: Similarity | None = None,
) -> tuple[str, list[common_pb2.Citation], bool]:
    """Pick the sentences that cover most of what the question asks (its words, or any synonym the tenant's
    glossary gives for them) from the top chunks; cite each chunk once as [n]."""
    lang = detect_language(query)
    concepts = glossary.concepts(query)
    same_language = {id(c) for c in context if detect_language(c.chunk.text) == lang}
    picked: list[Picked] = []
    for rank, chunk in enumerate(context):
        for pos, sent in enumerate(sentences(chunk.chunk.text)):
            overlap = concept_coverage(concepts, sent)
            if overlap >= min_overlap:
                # Earlier (better-ranked) chunks win ties.
                picked.append(Picked(chunk, sent, overlap + 0.05 / (1 + rank), pos, overlap))
    # A sentence from a passage in the other language joins the answer only when it says more of what was asked
    # than every sentence in the question's language: a shared glossary word alone does not make it an answer.
    best_same = max((p.coverage for p in picked if id(p.chunk) in same_language), default=None)
    if best_same is not None:
        picked = [p for p in picked if id(p.chunk) in same_language or p.coverage >= best_same]
    if not picked:
        top = context[0] if context else None
        if top is not None and cross_lingual_min_probability is not None and _confidently_other_language(
                top, lang, cross_lingual_min_probability):
            # Retrieval and the reranker read across languages, word overlap cannot: quote the passage they chose,
            # its sentences chosen by meaning where an embedding is at hand, else its opening ones.
            if similarity is not None:
                lead, citations = _by_meaning(query, top, concepts, similarity, max_sentences)
            else:
                lead, citations = quote_lead(top, max_sentences)
            lead_in = _lead_in(query, [top])
            return (f"{lead_in}\n{lead}" if lead_in else lead), citations, False
        return NOT_FOUND[lang], [], True
    best = sorted(picked, key=lambda p: p.score, reverse=True)[:max_sentences]
    # Present in document order of the best chunk first, so the answer reads naturally.
    order = {id(c): i for i, c in enumerate(context)}
    best.sort(key=lambda p: (order[id(p.chunk)], p.position))
    citations: list[common_pb2.Citation] = []
    index_of: dict[str, int] = {}
    parts = []
    for p in best:
        cid = p.chunk.chunk.id
        if cid not in index_of:
            index_of[cid] = len(citations) + 1
            citations.append(cite(index_of[cid], p.chunk.chunk, p.sentence))
        else:
            citations[index_of[cid] - 1].quote += " " + p.sentence
        parts.append(f"{p.sentence} [{index_of[cid]}]")
    lead_in = _lead_in(query, [p.chunk for p in best])
    # Chinese sentences are joined without spaces: the question's language decides, or the quotes' behind a lead-in.
    quoted_lang = detect_language(best[0].chunk.chunk.text) if lead_in else lang
    answer = ("" if quoted_lang == "zh" else " ").join(parts)
    return (f"{lead_in}\n{answer}" if lead_in else answer), citations, False


def synthesize(query: str, hops: list[common_pb2.Hop], context: list[common_pb2.ScoredChunk],
               max_sentences: int, min_overlap: float, glossary: Glossary = NO_GLOSSARY) -> tuple[str, list[common_pb2.Citation], bool]:
    """Answer the original question from the reasoning steps; say what is missing."""
    lang = detect_language(query)
    text, citations, not_found = extract_answer(query, context, max_sentences, min_overlap, glossary=glossary)
    missing = [h.sub_question for h in hops if not h.intermediate_answer or h.intermediate_answer in NOT_FOUND.values()]
    if missing and not not_found:
        note = ("（以下子问题在文档中没有找到答案：" + "；".join(missing) + "）") if lang == "zh" else (
            " (No answer was found in the documents for: " + "; ".join(missing) + ".)")
        text += note
    return text, citations, not_found


def rewrite(query: str, previous: list[str], feedback: list[common_pb2.ScoredChunk]) -> str:
    """Keywords of the question plus the most frequent new terms of the feedback passages (PRF)."""
    lang = detect_language(query)
    keys = list(dict.fromkeys(question_tokens(query)))
    counts: Counter[str] = Counter()
    for chunk in feedback[:3]:
        counts.update(t for t in tokens(f"{chunk.chunk.title} {chunk.chunk.text}") if t not in keys and len(t) > 1)
    extra = [t for t, _ in counts.most_common(3 + len(previous))]
    # Each retry adds a little more feedback so rewrites differ from each other.
    terms = keys + extra[: 1 + len(previous)]
    candidate = ("" if lang == "zh" else " ").join(terms) if terms else query
    if candidate in previous or candidate == query:
        candidate = " ".join(terms + extra[len(previous) + 1 : len(previous) + 3])
    return candidate or query
