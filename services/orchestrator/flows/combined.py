"""Multi-hop and self-RAG combined: every hop's passages graded, the synthesis answered only from those graded
relevant, and the answer support-checked."""

from __future__ import annotations

from services.orchestrator.flows.calls import StageCalls
from services.orchestrator.flows.multihop import multihop
from services.orchestrator.flows.state import Run


async def combined(calls: StageCalls, run: Run) -> None:
    await multihop(calls, run, graded=True)
