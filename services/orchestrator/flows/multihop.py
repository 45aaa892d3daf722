"""Multi-hop: decompose; run the sub-questions in dependency order (independent ones at once), or, for a
question that does not split, take iterative bridge hops; then one synthesis over everything found that says
what is missing. Hops are bounded by max_hops, repeated sub-questions and cycles are skipped."""

from __future__ import annotations

import asyncio
import re

from opentelemetry import trace

from ragline.domain.lexical import question_coverage
from ragline.v1 import common_pb2, generator_pb2
from services.orchestrator.bridging import bridge_entities, evidence_sentence
from services.orchestrator.flows.calls import StageCalls
from services.orchestrator.flows.state import UNKNOWN, YES, Run, normalize
from services.orchestrator.flows.support import agree_with_grades, check_support

tracer = trace.get_tracer("ragline.orchestrator")
_PLACEHOLDER = re.compile(r"#(\d+)")
_CITATION = re.compile(r"\s*\[\d+\]")


async def multihop(calls: StageCalls, run: Run, graded: bool = False, first: common_pb2.Hop | None = None,
                   max_hops: int | None = None) -> None:
    """`graded`: the combined flow. `first`: a retrieval for the whole question already made (auto's multi-hop)."""
    s = calls.settings
    query = run.query.query
    max_hops = max_hops or s.max_hops
    if run.decomposition is not None:
        subs, kind = run.decomposition
    else:
        subs, kind = await calls.decompose(run, query, max_hops)
    if kind != "single" and len(subs) > 1:
        await _planned_hops(calls, run, subs[:max_hops], graded)
    else:
        await _bridge_hops(calls, run, query, graded, max_hops, first)
    pool = run.best_first()
    if graded and run.answer.grades.relevant != UNKNOWN:
        pool = [c for c in pool if c.chunk.id in run.relevant]
    context = pool[: s.top_k + len(run.answer.hops)]
    if not context:
        run.answer_not_found()
        return
    gen = await calls.generate(run, generator_pb2.GenerationInput(
        query=query, context=context, reasoning=run.answer.hops, mode=generator_pb2.GENERATION_MODE_SYNTHESIS))
    run.set_answer(gen)
    if graded:
        if run.answer.grades.relevant == YES:
            gen = await agree_with_grades(calls, run, context, gen)
        await check_support(calls, run, context, gen)


def _with_answers(question: str, answers: dict[int, str]) -> str:
    """The sub-question with each `#N` replaced by the answer to sub-question N, citation markers removed."""
    def answer(m: re.Match[str]) -> str:
        n = int(m.group(1))
        return _CITATION.sub("", answers[n]).strip() if n in answers else m.group(0)

    return _PLACEHOLDER.sub(answer, question)


async def _planned_hops(calls: StageCalls, run: Run, subs: list[common_pb2.SubQuestion], graded: bool) -> None:
    """A decomposition's sub-questions in dependency order. Those whose dependencies are answered run in
    parallel; a dependent one has each `#N` in its text replaced by sub-question N's answer, and gets those
    hops as its reasoning. One that repeats an earlier one shares its hop; one whose dependency found
    nothing is skipped, and stays in the hops unanswered so that the synthesis says what is missing."""
    done: dict[int, common_pb2.Hop] = {}
    repeats: dict[int, int] = {}
    asked: dict[str, int] = {}
    # A sub-question can only depend on earlier ones, so every round has something ready and the loop ends.
    needs = {i: [d for d in sub.depends_on if 0 <= d < i] for i, sub in enumerate(subs)}
    while len(done) < len(subs):
        ready = [i for i in range(len(subs)) if i not in done and all(d in done for d in needs[i])]
        if run.budget.expired():
            run.degrade(f"deadline: stopped before sub-question {ready[0]}")
            break
        wave: list[tuple[int, str, list[common_pb2.Hop]]] = []
        for i in ready:
            deps = [done[d] for d in needs[i]]
            question = _with_answers(subs[i].text, {d: done[d].intermediate_answer for d in needs[i]})
            if any(not h.intermediate_answer for h in deps):
                run.degrade(f"multihop: skipped {subs[i].text!r}: a sub-question it depends on was not answered")
                done[i] = common_pb2.Hop(index=i, sub_question=subs[i].text)
            elif normalize(question) in asked:
                run.degrade(f"multihop: skipped repeated sub-question {question!r}")
                repeats[i] = asked[normalize(question)]
            else:
                asked[normalize(question)] = i
                wave.append((i, question, deps))
        hops = await asyncio.gather(*(hop(calls, run, i, q, graded, reasoning=deps) for i, q, deps in wave))
        done.update((h.index, h) for h in hops)
        done.update((i, done[j]) for i, j in repeats.items())
    run.answer.hops.extend(done[i] for i in sorted(done) if i not in repeats)


async def hop(calls: StageCalls, run: Run, index: int, question: str, graded: bool, generate: bool = True,
              rerank: bool = True, reasoning: list[common_pb2.Hop] | None = None) -> common_pb2.Hop:
    """One hop: retrieve for the question, grade what was found if the flow is graded, answer it if asked to."""
    with tracer.start_as_current_span("orchestrator.hop") as span:
        span.set_attributes({"ragline.hop": index, "ragline.sub_question": question})
        retrieved = await calls.retrieve(run, question, calls.settings.top_k, rerank=rerank)
        run.remember(retrieved)
        usable = retrieved
        if graded:
            # Grading filters what the answer may use; every retrieved passage still feeds the next hop.
            usable, grade = await calls.grade_documents(run, question, retrieved)
            run.relevant.update(c.chunk.id for c in usable)
            if grade == YES or run.answer.grades.relevant == UNKNOWN:
                run.answer.grades.relevant = grade
        answer = ""
        if generate and usable and not run.budget.expired():
            gen = await calls.generate(run, generator_pb2.GenerationInput(query=question, context=usable,
                                                                           reasoning=reasoning or []))
            answer = "" if gen.not_found else gen.answer
        span.set_attributes({"ragline.chunks": len(retrieved), "ragline.usable_chunks": len(usable)})
        return common_pb2.Hop(index=index, sub_question=question, intermediate_answer=answer,
                              chunk_ids=[c.chunk.id for c in retrieved])


async def _bridge_hops(calls: StageCalls, run: Run, query: str, graded: bool, max_hops: int,
                       first: common_pb2.Hop | None = None) -> None:
    """Iterative retrieval: each next hop looks up what the previous hop's best new passage names that
    the question does not (the bridge entity). The entity's sentence is that hop's intermediate answer,
    passed on in the next hop's query; no generator call is needed until the final synthesis.
    In the adaptive flow (`first` given) the hops also stop once what they found covers the question."""
    question = query
    asked: set[str] = set()
    for index in range(max_hops):
        if normalize(question) in asked:
            run.degrade(f"multihop: cycle detected at hop {index}, stopped")
            break
        if run.budget.expired():
            run.degrade(f"deadline: stopped before hop {index}")
            break
        asked.add(normalize(question))
        before = set() if index == 0 and first is not None else set(run.seen)
        this = first if index == 0 and first is not None else await hop(
            calls, run, index, question, graded, generate=False, rerank=index == 0 or calls.settings.rerank_bridge_hops)
        new = [run.seen[cid] for cid in this.chunk_ids if cid not in before]
        entities = [e for c in new[:2] for e in bridge_entities(question, c.chunk.text)]
        entities = [e for e in dict.fromkeys(entities) if e.lower() not in question.lower()][:2]
        if entities:
            source = next(c for c in new if entities[0] in c.chunk.text)
            this.intermediate_answer = evidence_sentence(source.chunk.text, entities[0])
        run.answer.hops.append(this)
        if not entities:
            break
        if first is not None and index > 0 and hops_cover(calls, run, query):
            run.answer.route_reason += f"; the {index + 1} hops found cover the question, stopped"
            break
        if index + 1 == max_hops:
            trace.get_current_span().set_attribute("ragline.hop_bound_reached", True)
            break
        question = f"{query} {' '.join(entities)}"


def hops_cover(calls: StageCalls, run: Run, query: str) -> bool:
    """Whether each hop's best passages, taken together, cover the question's content words."""
    s = calls.settings
    best = [run.seen[cid] for h in run.answer.hops for cid in h.chunk_ids[: s.escalation_passages]]
    return question_coverage(query, best) >= s.escalation_coverage
