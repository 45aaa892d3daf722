"""`ragline eval qa`: ingest a data set's passages into a fresh tenant, then answer every question with each
strategy through the running orchestrator, and score the answers and what the flows retrieved."""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable

import grpc

from ragline.domain.strategies import STRATEGIES, strategy_name
from ragline.eval.datasets import Dataset, Question
from ragline.eval.metrics import contains_answer, exact_match, f1, percentile
from ragline.eval.retrieval import Stubs, fresh_tenant, ingest
from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc, retrieval_pb2


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def support_recall(q: Question, a: common_pb2.Answer, k: int = 10) -> float:
    return len(set(a.retrieved_documents[:k]) & set(q.relevant)) / len(q.relevant)


def per_question_record(strategy: str, q: Question, a: common_pb2.Answer, ms: float) -> dict:
    """What one answer cost and found, for analyses the aggregate figures cannot answer."""
    return {"strategy": strategy, "id": q.id, "question": q.text, "acc": contains_answer(a.text, q.answers) if q.answerable else None,
            "support_recall@10": support_recall(q, a) if q.relevant else None, "not_found": a.not_found,
            "stage_calls": a.stage_calls, "llm_calls": a.llm_calls, "ms": round(ms, 1),
            "strategy_used": strategy_name(a.strategy_used),
            "route_reason": a.route_reason, "hops": len(a.hops)}


def score_strategy(answers: list[tuple[Question, common_pb2.Answer, float]]) -> dict:
    answerable = [(q, a) for q, a, _ in answers if q.answerable]
    unanswerable = [(q, a) for q, a, _ in answers if not q.answerable]
    with_gold = [(q, a) for q, a, _ in answers if q.relevant]
    out = {
        "n": len(answers),
        "n_answerable": len(answerable),
        "acc": _mean([contains_answer(a.text, q.answers) for q, a in answerable]),
        "em": _mean([exact_match(a.text, q.answers) for q, a in answerable]),
        "f1": _mean([f1(a.text, q.answers) for q, a in answerable]),
        "support_recall@10": _mean([support_recall(q, a) for q, a in with_gold]),
        "support_recall@5": _mean([support_recall(q, a, 5) for q, a in with_gold]),
        "stage_calls": _mean([a.stage_calls for _, a, _ in answers]),
        "llm_calls": _mean([a.llm_calls for _, a, _ in answers]),
        "mean_ms": _mean([ms for _, _, ms in answers]),
        "p50_ms": percentile([ms for _, _, ms in answers], 50),
        "p95_ms": percentile([ms for _, _, ms in answers], 95),
        "routes": dict(Counter(strategy_name(a.strategy_used)
                               for _, a, _ in answers)),
    }
    if unanswerable:
        out["abstain_rate"] = _mean([float(a.not_found) for _, a in unanswerable])
        out["false_abstain_rate"] = _mean([float(a.not_found) for _, a in answerable])
        # Of the answers that said "not found", the share that were right to.
        said_not_found = [q for q, a, _ in answers if a.not_found]
        out["not_found_precision"] = _mean([float(not q.answerable) for q in said_not_found])
    return out


def run(ds: Dataset, strategies: list[str], limit: int | None, keep: bool = False, timeout_s: float = 120.0,
        per_question: str | None = None) -> dict:
    log: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    stubs = Stubs.connect()
    address = os.environ.get("RAGLINE_ORCHESTRATOR_ADDRESS", f"127.0.0.1:{DEFAULT_PORTS['orchestrator']}")
    orchestrator = orchestrator_pb2_grpc.OrchestratorServiceStub(grpc.insecure_channel(address))
    questions = ds.questions[: limit or None]
    tenant = fresh_tenant(ds, prefix="evalqa")
    log(f"ingesting {len(ds.passages)} passages into tenant {tenant}")
    ingest(stubs, tenant, ds, log)
    results: dict[str, dict] = {}
    if per_question:
        open(per_question, "w", encoding="utf-8").close()
    try:
        for name in strategies:
            answers = []
            for i, q in enumerate(questions):
                t0 = time.perf_counter()
                answer = orchestrator.RunFlow(orchestrator_pb2.RunFlowRequest(query=orchestrator_pb2.FlowQuery(
                    tenant=tenant, query=q.text, strategy=STRATEGIES[name])), timeout=timeout_s).answer
                answers.append((q, answer, (time.perf_counter() - t0) * 1000))
                if (i + 1) % 25 == 0:
                    log(f"  {name}: {i + 1}/{len(questions)}")
            results[name] = score_strategy(answers)
            groups = sorted({q.group for q in questions if q.group})
            if groups:
                results[name]["groups"] = {g: score_strategy([a for a in answers if a[0].group == g]) for g in groups}
            if per_question:
                with open(per_question, "a", encoding="utf-8") as out:
                    out.writelines(json.dumps(per_question_record(name, *a), ensure_ascii=False) + "\n" for a in answers)
            log(f"  {name}: acc {results[name]['acc']:.3f}, support recall@10 {results[name]['support_recall@10']:.3f}")
    finally:
        if not keep:
            stubs.retrieval.DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant=tenant), timeout=120)
    return {"strategies": results, "n": len(questions), "n_passages": len(ds.passages), "tenant": tenant}


def markdown(result: dict) -> str:
    rows = result["strategies"]
    has_abstain = any("abstain_rate" in r for r in rows.values())
    head = "| strategy | n | acc | EM | F1 | support R@10 | stage calls | LLM calls | p50 ms | p95 ms |"
    if has_abstain:
        head += " abstain (unanswerable) | false abstain |"
    lines = [f"{result['n']} questions over {result['n_passages']} passages", "", head,
             "|" + "---|" * (head.count("|") - 1)]
    for name, r in rows.items():
        line = (f"| {name} | {r['n']} | {r['acc']:.3f} | {r['em']:.3f} | {r['f1']:.3f} | {r['support_recall@10']:.3f} | "
                f"{r['stage_calls']:.1f} | {r['llm_calls']:.1f} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} |")
        if has_abstain:
            line += f" {r.get('abstain_rate', 0):.3f} | {r.get('false_abstain_rate', 0):.3f} |"
        lines.append(line)
    if "auto" in rows:
        lines += ["", "auto routes: " + ", ".join(f"{k} {v}" for k, v in sorted(rows["auto"]["routes"].items()))]
    if any("groups" in r for r in rows.values()):
        lines += ["", "By group (answerable: acc / support recall@5; absent: share answered 'not found'):", "",
                  "| strategy | " + " | ".join(next(r for r in rows.values() if "groups" in r)["groups"]) + " |",
                  "|---|" + "---|" * len(next(r for r in rows.values() if "groups" in r)["groups"])]
        for name, r in rows.items():
            cells = [f"{g['abstain_rate']:.3f}" if not g["n_answerable"] else f"{g['acc']:.3f} / {g['support_recall@5']:.3f}"
                     for g in r.get("groups", {}).values()]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        if any("not_found_precision" in r for r in rows.values()):
            lines += ["", "not-found precision (share of 'not found' answers whose question has no answer): "
                      + ", ".join(f"{name} {r['not_found_precision']:.3f}" for name, r in rows.items() if "not_found_precision" in r)]
    return "\n".join(lines)
