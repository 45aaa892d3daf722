"""Web-search fallback (Tavily's HTTP API), used by self-RAG when the knowledge base has nothing relevant
after the rewrites. Off unless an API key is configured."""

from __future__ import annotations

import hashlib

import httpx
import pybreaker
from opentelemetry import trace

from ragline.runtime.clients import StageUnavailable, make_breaker
from ragline.runtime.config import RuntimeSettings
from ragline.runtime.deadlines import Budget, BudgetExhausted
from ragline.v1 import common_pb2

tracer = trace.get_tracer("ragline.websearch")


class WebSearch:
    def __init__(self, url: str, api_key: str, max_results: int, runtime: RuntimeSettings) -> None:
        self.url = url.rstrip("/") + "/search"
        self.api_key = api_key
        self.max_results = max_results
        self.http = httpx.AsyncClient()
        self.breaker = make_breaker("websearch", runtime)

    async def search(self, query: str, budget: Budget) -> list[common_pb2.ScoredChunk]:
        try:
            timeout = budget.timeout()
        except BudgetExhausted as exc:
            raise StageUnavailable("websearch", "skipped: deadline budget exhausted") from exc
        with tracer.start_as_current_span("websearch.tavily") as span:
            span.set_attribute("ragline.query", query)
            try:
                with self.breaker.calling():
                    resp = await self.http.post(self.url, timeout=timeout, json={"query": query, "max_results": self.max_results},
                                                headers={"Authorization": f"Bearer {self.api_key}"})
                    resp.raise_for_status()
            except pybreaker.CircuitBreakerError as exc:
                raise StageUnavailable("websearch", "skipped: circuit open") from exc
            except httpx.HTTPError as exc:
                raise StageUnavailable("websearch", f"failed: {type(exc).__name__}") from exc
            results = resp.json().get("results", [])
            span.set_attribute("ragline.results", len(results))
        chunks = []
        for r in results:
            url = str(r.get("url", ""))
            chunk_id = "web:" + hashlib.sha1(url.encode()).hexdigest()[:16]
            chunks.append(common_pb2.ScoredChunk(
                chunk=common_pb2.Chunk(id=chunk_id, document_id=url, title=str(r.get("title", "")), text=str(r.get("content", "")),
                                       source=url, metadata={"origin": "web"}),
                score=float(r.get("score", 0.0))))
        return chunks

    async def close(self) -> None:
        await self.http.aclose()
