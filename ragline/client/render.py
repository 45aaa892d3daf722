"""How the CLI and the demo print an answer: text, sources, route, hops, grades and degradations."""

from __future__ import annotations

from ragline.domain.answers import place
from ragline.v1 import common_pb2


def print_answer(answer: common_pb2.Answer) -> None:
    print(answer.text)
    if answer.citations:
        print("\nSources:")
        for c in answer.citations:
            print(f"  [{c.index}] {c.title} ({place(c)})")
    print(f"\nroute: {common_pb2.QueryType.Name(answer.query_type)} -> {common_pb2.Strategy.Name(answer.strategy_used)}"
          f" ({answer.route_reason})")
    if answer.intent or answer.filters:
        filters = "; ".join(f"{f.field} in {list(f.values)}" for f in answer.filters) or "none"
        print(f"  intent: {answer.intent or 'n/a'}; filters: {filters}")
    for hop in answer.hops:
        print(f"  hop {hop.index}: {hop.sub_question} => {hop.intermediate_answer[:120] or '(nothing found)'}")
    g = answer.grades
    if g.relevant or g.supported or g.useful:
        print(f"  grades: relevant={common_pb2.Grade.Name(g.relevant)} supported={common_pb2.Grade.Name(g.supported)}"
              f" useful={common_pb2.Grade.Name(g.useful)}")
    for rw in answer.rewrites:
        print(f"  rewrite: {rw}")
    for d in answer.degradations:
        print(f"  degraded: {d}")
    if answer.llm_calls:
        u = answer.usage
        print(f"  model calls: {answer.llm_calls}; tokens: {u.prompt_tokens} in, {u.completion_tokens} out; cost ${u.cost_usd:.4f}")
    print(f"  stage calls: {answer.stage_calls}; trace: http://127.0.0.1:16686/api/traces/{answer.trace_id}")
