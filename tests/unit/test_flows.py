"""Branch coverage of the flows with scripted stages (the mesh tests run the same flows over real services)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from ragline.runtime.clients import StageUnavailable
from ragline.runtime.deadlines import Budget
from ragline.v1 import common_pb2, generator_pb2, grader_pb2, orchestrator_pb2, reranker_pb2, retrieval_pb2, router_pb2
from services.orchestrator.config import OrchestratorSettings
from services.orchestrator.flows import NOT_FOUND, UNCERTAIN, FlowError, FlowRunner

YES, NO = common_pb2.GRADE_YES, common_pb2.GRADE_NO


def chunk(cid: str, text: str, title: str = "") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=cid, document_id=cid, title=title or cid, text=text), score=1.0)


def sub_question(sub: str | tuple[str, list[int]]) -> common_pb2.SubQuestion:
    text, depends_on = (sub, []) if isinstance(sub, str) else sub
    return common_pb2.SubQuestion(text=text, depends_on=depends_on)


class Scripted:
    """Stages whose answers each test sets; records every call."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.route_to = common_pb2.STRATEGY_STANDARD
        self.results: list[common_pb2.ScoredChunk] = [chunk("a", "HikariCP default pool size is 10.")]
        self.search_by_query: dict[str, list[common_pb2.ScoredChunk]] = {}
        self.relevant: set[str] | None = None  # None: everything relevant
        self.supported = [YES]
        self.useful = YES
        self.down: set[str] = set()
        self.decomposition: tuple[list[str | tuple[str, list[int]]], str] = ([], "single")
        self.rewrites = iter(f"rewrite {i}" for i in range(100))
        self.search_delay = 0.0
        self.route_decomposition: tuple[list[str], str] | None = None
        self.searched: list[str] = []
        self.route_filters: list[common_pb2.MetadataFilter] = []
        self.filtered_results: list[common_pb2.ScoredChunk] | None = None  # None: filters change nothing
        self.searched_with: list[list[common_pb2.MetadataFilter]] = []
        self.ranked_for: list[str] = []
        self.generated: list[generator_pb2.GenerationInput] = []
        self.searching = 0
        self.most_searching_at_once = 0

    def _enter(self, name: str, stage: str) -> None:
        self.calls.append(name)
        if stage in self.down:
            raise StageUnavailable(stage, "skipped: circuit open")

    async def route(self, req: router_pb2.RouteRequest, budget: Budget) -> router_pb2.RouteResponse:
        self._enter("route", "router")
        resp = router_pb2.RouteResponse(strategy=self.route_to, query_type=common_pb2.QUERY_TYPE_COMPLEX_REASONING, reason="scripted",
                                        intent="troubleshoot", filters=self.route_filters)
        if self.route_decomposition:
            subs, resp.decomposition = self.route_decomposition
            resp.sub_questions.extend(common_pb2.SubQuestion(text=t) for t in subs)
        return resp

    async def search(self, req: retrieval_pb2.SearchRequest, budget: Budget) -> retrieval_pb2.SearchResponse:
        self._enter("search", "retrieval")
        self.searched.append(req.query)
        self.searched_with.append(list(req.filters))
        self.searching += 1
        self.most_searching_at_once = max(self.most_searching_at_once, self.searching)
        try:
            await asyncio.sleep(self.search_delay)
        finally:
            self.searching -= 1
        if req.filters and self.filtered_results is not None:
            return retrieval_pb2.SearchResponse(results=self.filtered_results)
        return retrieval_pb2.SearchResponse(results=self.search_by_query.get(req.query, self.results))

    async def rerank(self, req: reranker_pb2.RerankRequest, budget: Budget) -> reranker_pb2.RerankResponse:
        self._enter("rerank", "reranker")
        self.ranked_for.append(req.query)
        return reranker_pb2.RerankResponse(results=list(req.candidates)[: req.top_k])

    async def grade_documents(self, req: grader_pb2.GradeDocumentsRequest, budget: Budget) -> grader_pb2.GradeDocumentsResponse:
        self._enter("grade_documents", "grader")
        return grader_pb2.GradeDocumentsResponse(grades=[
            grader_pb2.DocumentGrade(chunk_id=c.chunk.id, relevant=YES if self.relevant is None or c.chunk.id in self.relevant else NO)
            for c in req.candidates])

    async def grade_answer(self, req: grader_pb2.GradeAnswerRequest, budget: Budget) -> grader_pb2.GradeAnswerResponse:
        self._enter("grade_answer", "grader")
        supported = self.supported.pop(0) if len(self.supported) > 1 else self.supported[0]
        return grader_pb2.GradeAnswerResponse(supported=supported, useful=self.useful)

    async def generate(self, req: generator_pb2.GenerateRequest, budget: Budget) -> generator_pb2.GenerateResponse:
        self._enter(f"generate:{generator_pb2.GenerationMode.Name(req.input.mode)}", "generator")
        self.generated.append(req.input)
        if not req.input.context:
            return generator_pb2.GenerateResponse(answer="hello")
        c = req.input.context[0].chunk
        return generator_pb2.GenerateResponse(answer=f"{c.text} [1]", citations=[common_pb2.Citation(index=1, chunk_id=c.id)])

    async def decompose(self, req: generator_pb2.DecomposeRequest, budget: Budget) -> generator_pb2.DecomposeResponse:
        self._enter("decompose", "generator")
        subs, kind = self.decomposition
        return generator_pb2.DecomposeResponse(sub_questions=[sub_question(s) for s in (subs or [req.query])], kind=kind)

    async def rewrite(self, req: generator_pb2.RewriteQueryRequest, budget: Budget) -> generator_pb2.RewriteQueryResponse:
        self._enter("rewrite", "generator")
        return generator_pb2.RewriteQueryResponse(query=next(self.rewrites))


SETTINGS = OrchestratorSettings(max_hops=3, max_retries=3)


async def run(stages: Scripted, query: str, strategy: int, seconds: float = 5.0) -> common_pb2.Answer:
    runner = FlowRunner(stages, SETTINGS)
    return await runner.run(orchestrator_pb2.FlowQuery(tenant="t", query=query, strategy=strategy), Budget(seconds, 0.01))


async def test_standard_retrieves_reranks_and_generates():
    s = Scripted()
    answer = await run(s, "pool size?", common_pb2.STRATEGY_STANDARD)
    assert s.calls == ["search", "rerank", "generate:GENERATION_MODE_UNSPECIFIED"]
    assert answer.citations[0].chunk_id == "a" and answer.stage_calls == 3
    assert {t.stage for t in answer.timings} >= {"retrieve", "rerank", "generate"}


async def test_reranker_open_keeps_fused_order_and_says_so():
    s = Scripted()
    s.down = {"reranker"}
    answer = await run(s, "pool size?", common_pb2.STRATEGY_STANDARD)
    assert answer.text.startswith("HikariCP")
    assert any("reranker" in d and "fused" in d for d in answer.degradations)


async def test_retrieval_down_is_unavailable():
    s = Scripted()
    s.down = {"retrieval"}
    with pytest.raises(FlowError) as err:
        await run(s, "pool size?", common_pb2.STRATEGY_STANDARD)
    assert err.value.code == grpc.StatusCode.UNAVAILABLE


async def test_generator_down_quotes_best_passage():
    s = Scripted()
    s.down = {"generator"}
    answer = await run(s, "pool size?", common_pb2.STRATEGY_STANDARD)
    assert answer.text.endswith("[1]") and any("generator" in d for d in answer.degradations)


async def test_selfrag_retries_are_bounded_and_end_in_not_found():
    s = Scripted()
    s.relevant = set()
    answer = await run(s, "Redis 分片数量是多少？", common_pb2.STRATEGY_SELFRAG)
    assert s.calls.count("search") == SETTINGS.max_retries + 1
    assert len(answer.rewrites) == SETTINGS.max_retries
    assert answer.not_found and answer.text == NOT_FOUND["zh"]
    assert answer.grades.relevant == NO


async def test_selfrag_rewrite_finds_relevant_on_retry():
    s = Scripted()
    s.relevant = {"b"}
    s.search_by_query["rewrite 0"] = [chunk("b", "Pool size is 10.")]
    answer = await run(s, "pool size?", common_pb2.STRATEGY_SELFRAG)
    assert answer.rewrites == ["rewrite 0"] and answer.grades.relevant == YES
    assert answer.citations[0].chunk_id == "b"
    # The rewrite only widens the search: its results are ranked (and so graded) against the question itself.
    assert s.searched == ["pool size?", "rewrite 0"] and s.ranked_for == ["pool size?", "pool size?"]


async def test_selfrag_unsupported_regenerates_once_then_marks_uncertain():
    s = Scripted()
    s.supported = [NO, NO]
    answer = await run(s, "pool size?", common_pb2.STRATEGY_SELFRAG)
    assert s.calls.count("generate:GENERATION_MODE_REVISE") == 1
    assert answer.uncertain and answer.text.endswith(UNCERTAIN["en"])
    assert answer.grades.supported == NO


async def test_selfrag_not_useful_is_improved_once():
    s = Scripted()
    s.useful = NO
    answer = await run(s, "pool size?", common_pb2.STRATEGY_SELFRAG)
    assert s.calls.count("generate:GENERATION_MODE_REVISE") == 1
    assert answer.grades.useful == NO and not answer.uncertain


async def test_grader_down_answers_with_unknown_grades():
    s = Scripted()
    s.down = {"grader"}
    answer = await run(s, "pool size?", common_pb2.STRATEGY_SELFRAG)
    assert answer.text and answer.grades.relevant == common_pb2.GRADE_UNSPECIFIED
    assert any("grader" in d for d in answer.degradations)


async def test_multihop_parallel_sub_questions_and_duplicate_skipped():
    s = Scripted()
    s.decomposition = (["A size", "B size", "a size"], "comparison")
    answer = await run(s, "Compare A and B size", common_pb2.STRATEGY_MULTIHOP)
    assert [h.sub_question for h in answer.hops] == ["A size", "B size"]
    assert any("repeated sub-question" in d for d in answer.degradations)
    assert s.calls[-1] == "generate:GENERATION_MODE_SYNTHESIS"


async def test_independent_sub_questions_run_at_once_and_dependent_ones_wait_for_their_answers():
    s = Scripted()
    s.decomposition = ([("Who directed Inception?", []), ("Who composed its score?", []),
                        ("Where was #0 born?", [0])], "bridge")
    s.search_by_query = {
        "Who directed Inception?": [chunk("d", "Inception was directed by Christopher Nolan.")],
        "Who composed its score?": [chunk("s", "Hans Zimmer composed the score.")],
    }
    answer = await run(s, "Where was the director of Inception born, and who composed its score?",
                       common_pb2.STRATEGY_MULTIHOP)
    assert s.searched[:2] == ["Who directed Inception?", "Who composed its score?"] and s.most_searching_at_once == 2
    # The dependent hop asks with the answer it depends on (citation markers removed) and gets that hop as reasoning.
    dependent = answer.hops[2]
    assert dependent.sub_question == "Where was Inception was directed by Christopher Nolan. born?"
    assert s.searched[2] == dependent.sub_question
    hop_inputs = [g for g in s.generated if g.query == dependent.sub_question]
    assert [h.sub_question for h in hop_inputs[0].reasoning] == ["Who directed Inception?"]
    assert s.calls[-1] == "generate:GENERATION_MODE_SYNTHESIS"


async def test_a_sub_question_whose_dependency_found_nothing_is_skipped_and_reported_missing():
    s = Scripted()
    s.decomposition = ([("Who directed Inception?", []), ("Where was #0 born?", [0]), ("When was #1 founded?", [1])],
                       "bridge")
    s.search_by_query = {"Who directed Inception?": []}
    answer = await run(s, "Where was the director of Inception born?", common_pb2.STRATEGY_MULTIHOP)
    assert s.searched == ["Who directed Inception?"]
    assert [h.intermediate_answer for h in answer.hops] == ["", "", ""] and not answer.hops[2].chunk_ids
    assert answer.hops[1].sub_question == "Where was #0 born?"
    assert sum("depends on was not answered" in d for d in answer.degradations) == 2
    # Nothing was found at all, so the flow says so instead of synthesising.
    assert answer.not_found


async def test_bridge_hops_follow_entities_and_stop_at_the_bound():
    s = Scripted()
    # Every hop finds a new passage that names someone the question does not.
    counter = iter(range(100))

    async def search(req: retrieval_pb2.SearchRequest, budget: Budget) -> retrieval_pb2.SearchResponse:
        s.calls.append("search")
        n = next(counter)
        return retrieval_pb2.SearchResponse(results=[chunk(f"c{n}", f"It was produced by Maria Number{n} in Paris.")])

    s.search = search  # type: ignore[method-assign]
    answer = await run(s, "Who directed the film?", common_pb2.STRATEGY_MULTIHOP)
    assert len(answer.hops) == SETTINGS.max_hops
    assert "Maria Number0" in answer.hops[1].sub_question
    assert answer.hops[0].intermediate_answer == "It was produced by Maria Number0 in Paris."
    # Bridge hops need no generator call of their own: one synthesis at the end.
    assert [c for c in s.calls if c.startswith("generate")] == ["generate:GENERATION_MODE_SYNTHESIS"]
    # Only the first hop is reranked: a bridge hop's query already names what it looks for.
    assert s.calls.count("rerank") == 1 and s.calls.count("search") == SETTINGS.max_hops


async def test_bridge_hops_stop_when_nothing_new_is_named():
    s = Scripted()
    s.results = [chunk("x", "The film was directed well.")]
    answer = await run(s, "Who directed the film?", common_pb2.STRATEGY_MULTIHOP)
    assert len(answer.hops) == 1


async def test_bridge_hops_detect_cycles():
    s = Scripted()
    names = iter(["Anna Karlsson", "Bert Olsen"] * 10)
    counter = iter(range(100))

    async def search(req: retrieval_pb2.SearchRequest, budget: Budget) -> retrieval_pb2.SearchResponse:
        s.calls.append("search")
        # New passages each time, naming two people in turn: the third hop would repeat the second.
        return retrieval_pb2.SearchResponse(results=[chunk(f"c{next(counter)}", f"Made by {next(names)}.")])

    s.search = search  # type: ignore[method-assign]
    runner = FlowRunner(s, OrchestratorSettings(max_hops=5))
    answer = await runner.run(orchestrator_pb2.FlowQuery(tenant="t", query="Who directed the film?",
                                                         strategy=common_pb2.STRATEGY_MULTIHOP), Budget(5, 0.01))
    assert [h.sub_question for h in answer.hops] == [
        "Who directed the film?", "Who directed the film? Anna Karlsson", "Who directed the film? Bert Olsen"]
    assert any("cycle detected at hop 3" in d for d in answer.degradations)


async def test_deadline_cut_off_returns_deadline_exceeded_when_nothing_found():
    s = Scripted()
    with pytest.raises(FlowError) as err:
        await run(s, "pool size?", common_pb2.STRATEGY_STANDARD, seconds=0.005)
    assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_adaptive_falls_back_to_standard_when_the_chosen_flow_fails():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP

    async def broken(req: generator_pb2.DecomposeRequest, budget: Budget) -> generator_pb2.DecomposeResponse:
        raise FlowError(grpc.StatusCode.INTERNAL, "boom")

    s.decompose = broken  # type: ignore[method-assign]
    answer = await run(s, "Compare A and B", common_pb2.STRATEGY_AUTO)
    assert answer.strategy_used == common_pb2.STRATEGY_STANDARD
    assert any("fell back to standard" in d for d in answer.degradations)
    assert answer.citations


async def test_adaptive_uses_rules_when_router_is_down():
    s = Scripted()
    s.down = {"router"}
    answer = await run(s, "你好", common_pb2.STRATEGY_AUTO)
    assert answer.strategy_used == common_pb2.STRATEGY_DIRECT
    assert answer.query_type == common_pb2.QUERY_TYPE_NO_RETRIEVAL
    assert "search" not in s.calls


async def test_adaptive_searches_with_the_routers_filters_and_reports_them_with_the_intent():
    s = Scripted()
    runbooks = common_pb2.MetadataFilter(field="doc_type", values=["markdown"])
    s.route_filters = [runbooks]
    answer = await run(s, "Redis is down in the runbook, how do I fix it?", common_pb2.STRATEGY_AUTO)
    assert s.searched_with == [[runbooks]]
    assert answer.intent == "troubleshoot" and list(answer.filters) == [runbooks]


async def test_filters_read_from_the_question_are_dropped_when_they_match_nothing():
    s = Scripted()
    s.route_filters = [common_pb2.MetadataFilter(field="doc_type", values=["code"])]
    s.filtered_results = []
    answer = await run(s, "Where in the source code is the pool size set?", common_pb2.STRATEGY_AUTO)
    assert [len(f) for f in s.searched_with] == [1, 0] and answer.citations and not answer.filters
    assert any("searched without them" in d for d in answer.degradations)


async def test_the_callers_own_filters_are_kept_even_when_they_match_nothing():
    s = Scripted()
    s.filtered_results = []
    runner = FlowRunner(s, SETTINGS)
    wanted = common_pb2.MetadataFilter(field="doc_type", values=["code"])
    answer = await runner.run(orchestrator_pb2.FlowQuery(tenant="t", query="pool size?", strategy=common_pb2.STRATEGY_AUTO,
                                                         filters=[wanted]), Budget(5, 0.01))
    assert len(s.searched_with) == 1 and answer.not_found and list(answer.filters) == [wanted]


async def test_invalid_input_is_invalid_argument():
    with pytest.raises(FlowError) as err:
        await run(Scripted(), "  ", common_pb2.STRATEGY_STANDARD)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(FlowError) as err:
        await run(Scripted(), "q", 99)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT


async def test_auto_multihop_stops_after_one_retrieval_when_it_covers_the_question():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP
    s.results = [chunk("a", "HikariCP default pool size is 10.", title="HikariCP")]
    answer = await run(s, "HikariCP default pool size?", common_pb2.STRATEGY_AUTO)
    assert "decompose" not in s.calls and len(answer.hops) == 1
    assert s.calls == ["route", "search", "rerank", "generate:GENERATION_MODE_UNSPECIFIED"]
    assert "no further hops" in answer.route_reason


async def test_auto_multihop_escalates_when_the_first_retrieval_falls_short():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP
    s.results = [chunk("a", "The journal is published by the American Psychological Association.")]
    answer = await run(s, "Who was the first president of the association that publishes the journal?",
                       common_pb2.STRATEGY_AUTO)
    assert "decompose" in s.calls and s.calls[-1] == "generate:GENERATION_MODE_SYNTHESIS"
    assert "escalated to multi-hop" in answer.route_reason
    # The first retrieval is reused as hop 0, not repeated.
    assert s.calls.count("search") == len(answer.hops)


async def test_auto_multihop_stops_hopping_once_the_hops_cover_the_question():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP
    question = "Who was the first president of the association that publishes the journal?"
    s.search_by_query = {
        question: [chunk("a", "The journal is published by the American Psychological Association.")],
        f"{question} American Psychological Association": [
            chunk("b", "Its first president was G. Stanley Hall, named by the Nordic Council.")],
    }
    auto = await run(s, question, common_pb2.STRATEGY_AUTO)
    # The second hop's passage covers the rest of the question, so the entity it names is not followed.
    assert len(auto.hops) == 2 and "cover the question, stopped" in auto.route_reason
    fixed = await run(s, question, common_pb2.STRATEGY_MULTIHOP)
    assert len(fixed.hops) == SETTINGS.max_hops


async def test_auto_multihop_takes_at_most_the_adaptive_hop_bound():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP
    question = "Who was the first president of the association that publishes the journal?"
    # Every passage names a new entity and none covers the question, so only a hop bound stops the hops.
    s.results = [chunk("a", "The journal is published by the American Psychological Association.")]
    s.search_by_query = {f"{question} American Psychological Association": [
        chunk("b", "The American Psychological Association was chartered in Washington Heights.")]}
    auto = await run(s, question, common_pb2.STRATEGY_AUTO)
    assert SETTINGS.adaptive_max_hops == 2 < SETTINGS.max_hops
    assert len(auto.hops) == SETTINGS.adaptive_max_hops and s.calls.count("search") == 2
    fixed = await run(s, question, common_pb2.STRATEGY_MULTIHOP)
    assert len(fixed.hops) == SETTINGS.max_hops


async def test_auto_uses_the_routers_decomposition_instead_of_asking_the_generator():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP
    s.route_decomposition = (["HikariCP pool size", "c3p0 pool size"], "comparison")
    s.results = [chunk("a", "Unrelated text about Oslo Harbour.")]
    answer = await run(s, "Compare HikariCP and c3p0 pool size", common_pb2.STRATEGY_AUTO)
    assert "decompose" not in s.calls
    assert [h.sub_question for h in answer.hops] == ["HikariCP pool size", "c3p0 pool size"]


async def test_combined_answers_only_from_graded_passages_but_counts_everything_retrieved():
    s = Scripted()
    s.results = [chunk("noise", "Unrelated text about Oslo Harbour."), chunk("a", "HikariCP default pool size is 10.")]
    s.relevant = {"a"}
    answer = await run(s, "HikariCP default pool size?", common_pb2.STRATEGY_COMBINED)
    assert [c.chunk_id for c in answer.citations] == ["a"]
    assert set(answer.retrieved_documents) == {"noise", "a"}
    assert answer.grades.relevant == YES
