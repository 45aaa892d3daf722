"""Multi-hop (planned and bridge hops) and the combined flow."""

from __future__ import annotations

from ragline.runtime.deadlines import Budget
from ragline.v1 import common_pb2, orchestrator_pb2, retrieval_pb2
from services.orchestrator.config import OrchestratorSettings
from services.orchestrator.flows import FlowRunner
from tests.unit.orchestrator.scripted import SETTINGS, YES, Scripted, chunk, run


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


async def test_combined_answers_only_from_graded_passages_but_counts_everything_retrieved():
    s = Scripted()
    s.results = [chunk("noise", "Unrelated text about Oslo Harbour."), chunk("a", "HikariCP default pool size is 10.")]
    s.relevant = {"a"}
    answer = await run(s, "HikariCP default pool size?", common_pb2.STRATEGY_COMBINED)
    assert [c.chunk_id for c in answer.citations] == ["a"]
    assert set(answer.retrieved_documents) == {"noise", "a"}
    assert answer.grades.relevant == YES
