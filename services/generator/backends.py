"""Generation backends: the offline extractive generator, or an LLM through the openai package."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from ragline.domain.answers import NOT_FOUND, cite
from ragline.domain.decomposition import INSTRUCTIONS, KINDS, SUB_QUESTIONS_SCHEMA, decompose, from_model
from ragline.domain.glossary import NO_GLOSSARY, Glossaries
from ragline.domain.text import detect_language, sentences, tokens
from ragline.embedding import Embedder, cosine
from ragline.llm import PASSAGES_ARE_DATA, LlmClient, Usage, numbered_passages
from ragline.v1 import common_pb2, generator_pb2
from services.generator.config import GeneratorSettings
from services.generator.logic import DIRECT_ANSWER, extract_answer, rewrite, synthesize

MODE = generator_pb2


class OfflineGenerator:
    def __init__(self, settings: GeneratorSettings, glossaries: Glossaries | None = None,
                 embedder: Embedder | None = None) -> None:
        self.s = settings
        self.glossaries = glossaries or Glossaries()
        self.embedder = embedder

    def similarity(self, query: str, texts: list[str]) -> list[float]:
        assert self.embedder is not None
        q = self.embedder.embed_queries([query])[0]
        return [cosine(q, v) for v in self.embedder.embed_passages(texts)]

    async def generate(self, inp: generator_pb2.GenerationInput, usage: Usage) -> generator_pb2.GenerateResponse:
        s = self.s
        context = list(inp.context)[: s.max_context_chunks]
        if inp.mode == MODE.GENERATION_MODE_DIRECT:
            return generator_pb2.GenerateResponse(answer=DIRECT_ANSWER[detect_language(inp.query)])
        # The passages carry their tenant, and so say whose words the question is in.
        glossary = self.glossaries.for_tenant(context[0].chunk.tenant) if context else NO_GLOSSARY
        if inp.mode == MODE.GENERATION_MODE_SYNTHESIS:
            text, cites, not_found = synthesize(inp.query, list(inp.reasoning), context,
                                                s.max_sentences + len(inp.reasoning), s.min_sentence_overlap, glossary)
        else:
            # A revision is stricter: only sentences that overlap the question more are kept.
            strict = 0.15 if inp.mode == MODE.GENERATION_MODE_REVISE else 0.0
            similarity = self.similarity if self.embedder is not None else None
            text, cites, not_found = await asyncio.to_thread(
                extract_answer, inp.query, context, s.max_sentences, s.min_sentence_overlap + strict,
                None if strict else s.cross_lingual_min_probability, glossary, similarity)
        return generator_pb2.GenerateResponse(answer=text, citations=cites, not_found=not_found)

    async def decompose(self, query: str, max_hops: int, usage: Usage) -> tuple[list[tuple[str, list[int]]], str]:
        return decompose(query, max_hops)

    async def rewrite(self, query: str, previous: list[str], feedback: list[common_pb2.ScoredChunk], usage: Usage) -> str:
        return rewrite(query, previous, feedback)


ANSWER_PROMPT = """You answer questions using only the numbered passages given. Cite every claim with the
passage's number in square brackets, like [1]. If the passages do not contain the answer, reply exactly
with: {not_found}
Answer in the language of the question, briefly. """ + PASSAGES_ARE_DATA.replace("{", "{{").replace("}", "}}")
SYNTHESIS_NOTE = "Reasoning steps found so far (sub-question => intermediate answer):\n{steps}\n"
REVISE_NOTE = ("An earlier answer was judged unsupported or not useful:\n{previous}\n"
               "Write a better answer that is fully supported by the passages and addresses the question.\n")
DIRECT_PROMPT = "You are ragline, an assistant that answers questions about an organisation's documents. Reply briefly."
DECOMPOSE_SCHEMA = {
    "type": "object",
    "properties": {"kind": {"type": "string", "enum": KINDS}, "sub_questions": SUB_QUESTIONS_SCHEMA},
    "required": ["kind", "sub_questions"],
    "additionalProperties": False,
}
DECOMPOSE_PROMPT = "Decompose for a retrieval system: " + INSTRUCTIONS
REWRITE_SCHEMA = {"type": "object", "properties": {"query": {"type": "string", "maxLength": 300}}, "required": ["query"],
                  "additionalProperties": False}
REWRITE_PROMPT = """Rewrite a search query so that a hybrid keyword and vector search finds passages that answer
it. Keep its language. Do not repeat any of the earlier rewrites. Answer in JSON."""
_MARKER = re.compile(r"\[(\d+)\]")


def citations_from_markers(answer: str, context: list[common_pb2.ScoredChunk]) -> list[common_pb2.Citation]:
    """A citation for each [n] the model used, quoting the passage sentence closest to the cited claim."""
    cites: dict[int, common_pb2.Citation] = {}
    for sentence in sentences(answer):
        claim = set(tokens(_MARKER.sub(" ", sentence)))
        for n in map(int, _MARKER.findall(sentence)):
            if n in cites or not 1 <= n <= len(context):
                continue
            chunk = context[n - 1].chunk
            quote = max(sentences(chunk.text) or [chunk.text], key=lambda s: len(claim & set(tokens(s))))
            cites[n] = cite(n, chunk, quote)
    return [cites[n] for n in sorted(cites)]


class LlmGenerator:
    def __init__(self, llm: LlmClient, settings: GeneratorSettings) -> None:
        self.llm = llm
        self.s = settings

    async def generate(self, inp: generator_pb2.GenerationInput, usage: Usage,
                       on_delta: Callable[[str], None] | None = None) -> generator_pb2.GenerateResponse:
        """The model's answer; with on_delta, its tokens are handed over as they come (the final response, with
        its markers checked, is what counts)."""
        lang = detect_language(inp.query)
        if inp.mode == MODE.GENERATION_MODE_DIRECT:
            return generator_pb2.GenerateResponse(answer=await self.llm.text("direct", DIRECT_PROMPT, inp.query, usage,
                                                                             on_delta=on_delta))
        context = list(inp.context)[: self.s.max_context_chunks]
        if not context:
            return generator_pb2.GenerateResponse(answer=NOT_FOUND[lang], not_found=True)
        passages = numbered_passages(context)
        extra = ""
        # The final synthesis, and a hop that depends on earlier ones, see the reasoning so far.
        if inp.reasoning:
            extra = SYNTHESIS_NOTE.format(steps="\n".join(f"- {h.sub_question} => {h.intermediate_answer or '(not found)'}"
                                                          for h in inp.reasoning))
        if inp.mode == MODE.GENERATION_MODE_REVISE:
            extra = REVISE_NOTE.format(previous=inp.previous_answer)
        user = f"{extra}\nPassages:\n{passages}\n\nQuestion: {inp.query}"
        text = (await self.llm.text("generate", ANSWER_PROMPT.format(not_found=NOT_FOUND[lang]), user, usage,
                                    on_delta=on_delta)).strip()
        not_found = text.rstrip("。.") == NOT_FOUND[lang].rstrip("。.")
        if not_found:
            return generator_pb2.GenerateResponse(answer=text, not_found=True)
        # A model may cite passages it was not given: such markers go; what is left cites only real passages.
        text = _MARKER.sub(lambda m: m.group(0) if 1 <= int(m.group(1)) <= len(context) else "", text).strip()
        citations = citations_from_markers(text, context)
        return generator_pb2.GenerateResponse(answer=text, citations=citations, uncited=not citations)

    async def decompose(self, query: str, max_hops: int, usage: Usage) -> tuple[list[tuple[str, list[int]]], str]:
        out = await self.llm.structured("decompose", DECOMPOSE_PROMPT.format(max_hops=max_hops), query, DECOMPOSE_SCHEMA, usage)
        return from_model(out["sub_questions"], query, max_hops), out["kind"]

    async def rewrite(self, query: str, previous: list[str], feedback: list[common_pb2.ScoredChunk], usage: Usage) -> str:
        titles = ", ".join(dict.fromkeys(c.chunk.title for c in feedback[:3]))
        user = f"Query: {query}\nEarlier rewrites: {previous or 'none'}\nTitles of passages found so far: {titles or 'none'}"
        out = await self.llm.structured("rewrite", REWRITE_PROMPT, user, REWRITE_SCHEMA, usage)
        return out["query"].strip() or query
