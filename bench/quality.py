"""Benchmarks that need answers scored against public data: adaptive against fixed strategies on a mixed
single-hop + multi-hop set, multi-hop latency against the hop bound, and the reranker's input length against
its nDCG@10 and speed. One tenant holds the mixed set for all three."""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from pathlib import Path

from ragline.eval import qa
from ragline.eval.datasets import Dataset, Question, load
from ragline.eval.metrics import ndcg_at_k, percentile
from ragline.eval.retrieval import CANDIDATES, Stubs, dedupe
from ragline.runtime.config import RuntimeSettings
from ragline.runtime.deadlines import Budget
from ragline.v1 import common_pb2, orchestrator_pb2, retrieval_pb2
from services.orchestrator.config import OrchestratorSettings
from services.orchestrator.flows import FlowRunner
from services.orchestrator.stages import MeshStages
from services.reranker.features import Candidate
from services.reranker.logic import DEFAULT_MODEL, LearnedScorer

DATA = Path(__file__).resolve().parent.parent / "eval" / "data"


def mixed_set(per_kind: int) -> Dataset:
    """HotpotQA (multi-hop) and SQuAD 2.0 answerable (single-hop) questions interleaved, over both corpora."""
    hotpot = load("hotpotqa", DATA / "hotpotqa" / "hotpotqa_train.json")
    squad = load("squad", DATA / "squad" / "squad2_dev_2articles_626q.json")
    multi = hotpot.questions[:per_kind]
    single = [q for q in squad.questions if q.answerable][:per_kind]
    wanted = {pid for q in multi for pid in q.relevant}
    # Each HotpotQA question's own paragraphs (gold and distractors); all of SQuAD's paragraphs.
    hotpot_ids = _context_ids(hotpot, multi) | wanted
    passages = [p for p in hotpot.passages if p.id in hotpot_ids] + squad.passages
    interleaved = [q for pair in itertools.zip_longest(multi, single) for q in pair if q is not None]
    return Dataset("mixed", passages, interleaved)


def _context_ids(ds: Dataset, questions: list[Question]) -> set[str]:
    # load_hotpotqa keeps passages in question order, ten per question.
    index = {q.id: i for i, q in enumerate(ds.questions)}
    last = max(index[q.id] for q in questions)
    return {p.id for p in ds.passages[: (last + 1) * 10]}


def adaptive_vs_fixed(ds: Dataset) -> dict:
    """Runs standard, multi-hop and auto through the running orchestrator; keeps the tenant for the rest."""
    return qa.run(ds, ["standard", "multihop", "auto"], None, keep=True)


async def hops_sweep(tenant: str, questions: list[Question], bounds: tuple[int, ...] = (1, 2, 3, 4)) -> list[dict]:
    """The multi-hop flow with each hop bound, over the mesh's real stages (the flow runs in this process)."""
    stages = MeshStages(RuntimeSettings())
    rows = []
    try:
        for bound in bounds:
            runner = FlowRunner(stages, OrchestratorSettings(max_hops=bound))
            latency, hops, calls, recall = [], [], [], []
            for q in questions:
                t0 = time.perf_counter()
                answer = await runner.run(orchestrator_pb2.FlowQuery(tenant=tenant, query=q.text,
                                                                     strategy=common_pb2.STRATEGY_MULTIHOP), Budget(30))
                latency.append((time.perf_counter() - t0) * 1000)
                hops.append(len(answer.hops))
                calls.append(answer.stage_calls)
                recall.append(len(set(answer.retrieved_documents[:10]) & set(q.relevant)) / len(q.relevant))
            rows.append({"max_hops": bound, "p50": percentile(latency, 50), "p95": percentile(latency, 95),
                         "hops": statistics.mean(hops), "stage_calls": statistics.mean(calls),
                         "support_recall@10": statistics.mean(recall)})
    finally:
        await stages.close()
    return rows


def rerank_length_sweep(tenant: str, questions: list[Question], lengths: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)) -> dict:
    """nDCG@10 and scoring time of the learned reranker with its input cut at each maximum length (in the
    service's unit: about four characters a token), against the hybrid order, over the same candidates."""
    stubs = Stubs.connect()
    lists = []
    for q in questions:
        resp = stubs.retrieval.Search(retrieval_pb2.SearchRequest(tenant=tenant, query=q.text, alpha=0.5,
                                                                  limit=CANDIDATES), timeout=60)
        lists.append((q, list(resp.results)))
    hybrid = statistics.mean(ndcg_at_k(dedupe(results), q.relevant, 10) for q, results in lists)
    scorer = LearnedScorer(DEFAULT_MODEL)
    rows = []
    for length in lengths:
        ndcg, ms = [], []
        for q, results in lists:
            candidates = [Candidate.of(r, length * 4) for r in results]
            t0 = time.perf_counter()
            scores = scorer.score(q.text, candidates)
            ms.append((time.perf_counter() - t0) * 1000)
            order = [r for _, r in sorted(zip(scores, results, strict=True), key=lambda p: p[0], reverse=True)]
            ndcg.append(ndcg_at_k(dedupe(order), q.relevant, 10))
        rows.append({"max_length": length, "ndcg@10": statistics.mean(ndcg), "p50": percentile(ms, 50),
                     "p95": percentile(ms, 95)})
    return {"hybrid_ndcg@10": hybrid, "rows": rows}


async def measure(per_kind: int = 40) -> dict:
    ds = mixed_set(per_kind)
    print(f"  mixed set: {len(ds.questions)} questions over {len(ds.passages)} passages", flush=True)
    mixed = await asyncio.to_thread(adaptive_vs_fixed, ds)
    tenant = mixed["tenant"]
    try:
        multi = [q for q in ds.questions if q.kind in ("bridge", "comparison")]
        hops = await hops_sweep(tenant, multi)
        lengths = await asyncio.to_thread(rerank_length_sweep, tenant, multi)
    finally:
        Stubs.connect().retrieval.DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant=tenant), timeout=120)
    return {"mixed": mixed, "hops": hops, "rerank_lengths": lengths}
