"""`ragline eval retrieval`: ingest a data set's passages into a fresh tenant, then score every query with
pure BM25, pure vector, hybrid and hybrid + rerank."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlparse

import grpc

from ragline.eval.datasets import Dataset, Question
from ragline.eval.metrics import mrr_at_k, ndcg_at_k, percentile, recall_at_k
from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import reranker_pb2, reranker_pb2_grpc, retrieval_pb2, retrieval_pb2_grpc

MODES = ("bm25", "vector", "hybrid", "hybrid+rerank")
INGEST_BATCH = 64
CANDIDATES = 20
NAIVE_ALPHA = 0.5


@dataclass
class Stubs:
    retrieval: retrieval_pb2_grpc.RetrievalServiceStub
    reranker: reranker_pb2_grpc.RerankerServiceStub

    @classmethod
    def connect(cls) -> Stubs:
        opts = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
        r = grpc.insecure_channel(os.environ.get("RAGLINE_RETRIEVAL_ADDRESS", f"127.0.0.1:{DEFAULT_PORTS['retrieval']}"), opts)
        k = grpc.insecure_channel(os.environ.get("RAGLINE_RERANKER_ADDRESS", f"127.0.0.1:{DEFAULT_PORTS['reranker']}"), opts)
        return cls(retrieval_pb2_grpc.RetrievalServiceStub(r), reranker_pb2_grpc.RerankerServiceStub(k))


def fresh_tenant(ds: Dataset, prefix: str = "eval") -> str:
    digest = hashlib.sha1("".join(p.id for p in ds.passages).encode()).hexdigest()[:8]
    return f"{prefix}_{ds.name}_{digest}_{int(time.time())}"


def ingest(stubs: Stubs, tenant: str, ds: Dataset, log: Callable[[str], None]) -> float:
    """Ingest every passage as one document (its id is the passage id); returns passages per second."""
    started = time.perf_counter()
    for start in range(0, len(ds.passages), INGEST_BATCH):
        batch = ds.passages[start : start + INGEST_BATCH]
        resp = stubs.retrieval.Ingest(retrieval_pb2.IngestRequest(tenant=tenant, documents=[
            retrieval_pb2.Document(id=p.id, title=p.title, text=p.text, content_type=p.content_type) for p in batch]), timeout=1800)
        if resp.documents_failed:
            errors = [r.error for r in resp.results if r.error]
            raise RuntimeError(f"{resp.documents_failed} passages failed to ingest, e.g. {errors[0]}")
        done = start + len(batch)
        log(f"  ingested {done}/{len(ds.passages)} passages ({done / (time.perf_counter() - started):.1f}/s)")
    return len(ds.passages) / (time.perf_counter() - started)


def dedupe(results: list) -> list[str]:
    """Passage ids in rank order: a long passage may have been split into several chunks."""
    return list(dict.fromkeys(r.chunk.document_id for r in results))


ANALYSED_FIELDS = ("title_en", "text_en", "title_zh", "text_zh")
# The English words as written (Weaviate's `word` tokenizer), as every search read them before the analysed copy.
RAW_FIELDS = ("title", "text", "title_zh", "text_zh")


def query_properties(title_boost: float, fields: tuple[str, ...] = ANALYSED_FIELDS) -> list[retrieval_pb2.QueryProperty]:
    """The default search's properties (retrieval's default_query_properties) with another title boost."""
    return [retrieval_pb2.QueryProperty(name=name, boost=title_boost if name.startswith("title") else 1.0) for name in fields]


FUSIONS = {"relative": retrieval_pb2.FUSION_TYPE_RELATIVE_SCORE, "ranked": retrieval_pb2.FUSION_TYPE_RANKED}


def rank(stubs: Stubs, tenant: str, mode: str, query: str, alpha: float | None, k: int,
         props: list[retrieval_pb2.QueryProperty] | None = None, fusion: str = "relative") -> list[str]:
    limit = max(k, CANDIDATES)
    props = props or []
    if mode in ("bm25", "vector"):
        resp = stubs.retrieval.Search(retrieval_pb2.SearchRequest(
            tenant=tenant, query=query, alpha=0.0 if mode == "bm25" else 1.0, limit=limit, query_properties=props), timeout=60)
        return dedupe(list(resp.results))
    # No alpha: the service's own default for the tenant and the question's language.
    resp = stubs.retrieval.Search(retrieval_pb2.SearchRequest(tenant=tenant, query=query, alpha=alpha, limit=limit,
                                                              query_properties=props, fusion=FUSIONS[fusion]), timeout=60)
    if mode == "hybrid":
        return dedupe(list(resp.results))
    reranked = stubs.reranker.Rerank(reranker_pb2.RerankRequest(query=query, candidates=resp.results, top_k=limit), timeout=60)
    return dedupe(list(reranked.results))


def ranking_scores(rankings: list[list[str]], questions: list[Question], k: int) -> dict[str, float]:
    """Mean nDCG@10, Recall@k and MRR@10 of each question's ranking."""
    n = len(questions) or 1
    pairs = list(zip(rankings, questions, strict=True))
    return {"ndcg@10": sum(ndcg_at_k(r, q.relevant, 10) for r, q in pairs) / n,
            f"recall@{k}": sum(recall_at_k(r, q.relevant, k) for r, q in pairs) / n,
            "mrr@10": sum(mrr_at_k(r, q.relevant, 10) for r, q in pairs) / n}


def evaluate(stubs: Stubs, tenant: str, questions: list[Question], modes: tuple[str, ...], alpha: float | None, k: int,
             log: Callable[[str], None], props: list[retrieval_pb2.QueryProperty] | None = None,
             fusion: str = "relative", misses: list[dict] | None = None) -> dict[str, dict[str, float]]:
    """`misses`: filled with hybrid's questions whose first relevant passage is not ranked first."""
    out: dict[str, dict[str, float]] = {}
    for mode in modes:
        rankings, latency = [], []
        for q in questions:
            t0 = time.perf_counter()
            ranked = rank(stubs, tenant, mode, q.text, alpha, k, props, fusion)
            latency.append((time.perf_counter() - t0) * 1000)
            rankings.append(ranked)
            if misses is not None and mode == "hybrid" and not (ranked and ranked[0] in q.relevant):
                found = next((i + 1 for i, pid in enumerate(ranked) if pid in q.relevant), None)
                misses.append({"question": q.text, "rank": found, "first": ranked[0] if ranked else None,
                               "relevant": sorted(q.relevant)})
        out[mode] = {**ranking_scores(rankings, questions, k),
                     "p50_ms": percentile(latency, 50), "p95_ms": percentile(latency, 95)}
        log(f"  {mode}: nDCG@10 {out[mode]['ndcg@10']:.3f}")
    return out


def baseline_scores(ds: Dataset, questions: list[Question], alpha: float, k: int) -> dict[str, dict[str, float]]:
    """The naive hybrid (baseline.py) on the same data, with the embedder the retrieval service is configured with
    (and its vector cache, so that passages it has embedded are not embedded again)."""
    from ragline.embedding import DEFAULT_EMBEDDER, load_embedder
    from ragline.eval.baseline import NaiveHybrid
    from ragline.runtime.caches import cache_dir, cache_file
    from ragline.runtime.config import RuntimeSettings

    spec = os.environ.get("RAGLINE_RETRIEVAL_EMBEDDER", DEFAULT_EMBEDDER)
    cache = cache_file(os.environ.get("RAGLINE_RETRIEVAL_EMBED_CACHE", "embeddings.sqlite"), cache_dir(RuntimeSettings()))
    embedder = load_embedder(spec, cache)
    rankings = NaiveHybrid(ds, embedder).rankings(questions, alpha, k)
    return {f"naive {mode}": ranking_scores(ranked, questions, k) for mode, ranked in rankings.items()}


@contextmanager
def bm25_parameters(weaviate_url: str, collection: str) -> Iterator[Callable[[float, float], None]]:
    """A setter of the chunk collection's BM25 k1 and b (Weaviate keeps them per collection, for every tenant at once,
    and applies a change to the next query); the collection's own are put back afterwards."""
    import weaviate
    from weaviate.classes.config import Reconfigure

    url = urlparse(weaviate_url)
    with weaviate.connect_to_local(host=url.hostname or "127.0.0.1", port=url.port or 8080) as client:
        coll = client.collections.use(collection)
        before = coll.config.get().inverted_index_config.bm25

        def set_parameters(k1: float, b: float) -> None:
            coll.config.update(inverted_index_config=Reconfigure.inverted_index(bm25_k1=k1, bm25_b=b))

        try:
            yield set_parameters
        finally:
            set_parameters(before.k1, before.b)


def run(ds: Dataset, limit: int | None, k: int, alpha: float | None, modes: tuple[str, ...] = MODES, keep: bool = False,
        quiet: bool = False, sweep: tuple[float, ...] = (), baseline: bool = False,
        boost_sweep: tuple[float, ...] = (), raw_words: bool = False,
        bm25_sweep: tuple[tuple[float, float], ...] = (), weaviate_url: str = "http://127.0.0.1:8080",
        collection: str = "RaglineChunk", fusion: str = "relative", show_misses: bool = False) -> dict:
    """`sweep`: further alphas at which to score the fused modes, to choose a corpus's alpha; `boost_sweep`: title
    boosts at which to score bm25 and the fused modes (at `alpha`); `bm25_sweep`: (k1, b) pairs at which to score
    bm25 and the fused modes at `alpha` and every alpha of `sweep`. `baseline`: the naive hybrid scored beside, on the
    same questions. `fusion`: how the fused modes combine BM25 and vector (Weaviate's relative-score or ranked fusion).
    `show_misses`: list hybrid's questions whose passage is not ranked first, with the rank it had."""
    log = (lambda _: None) if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    stubs = Stubs.connect()
    questions = [q for q in ds.questions if q.relevant][: limit or None]
    tenant = fresh_tenant(ds)
    log(f"ingesting {len(ds.passages)} passages into tenant {tenant}")
    rate = ingest(stubs, tenant, ds, log)
    try:
        misses: list[dict] | None = [] if show_misses else None
        modes_out = evaluate(stubs, tenant, questions, modes, alpha, k, log, fusion=fusion, misses=misses)
        groups = sorted({q.group for q in questions if q.group})
        by_group = {g: evaluate(stubs, tenant, [q for q in questions if q.group == g], modes, alpha, k, lambda _: None,
                                fusion=fusion) for g in groups}
        fused = tuple(m for m in modes if m.startswith("hybrid"))
        boosted = tuple(m for m in modes if m == "bm25" or m.startswith("hybrid"))

        def ndcg(these: tuple[str, ...], a: float | None, props: list[retrieval_pb2.QueryProperty] | None = None,
                 suffix: str = "") -> dict[str, float]:
            """nDCG@10 of each of these modes at alpha `a`, named mode + suffix."""
            return {m + suffix: v["ndcg@10"] for m, v in evaluate(stubs, tenant, questions, these, a, k, log, props, fusion).items()}

        swept = {a: ndcg(fused, a) for a in sweep if fused}
        boosts = {b: ndcg(boosted, alpha, query_properties(b)) for b in boost_sweep}
        raw = ndcg(boosted, alpha, query_properties(1.0, RAW_FIELDS)) if raw_words else {}
        bm25: dict[str, dict[str, float]] = {}
        if bm25_sweep:
            with bm25_parameters(weaviate_url, collection) as set_parameters:
                for k1, b in bm25_sweep:
                    set_parameters(k1, b)
                    scored = ndcg(boosted, alpha)
                    for a in sweep:
                        scored |= ndcg(fused, a, suffix=f" at {a}")
                    bm25[f"{k1:g}/{b:g}"] = scored
    finally:
        if not keep:
            stubs.retrieval.DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant=tenant), timeout=120)
    out = {"modes": modes_out, "n_queries": len(questions), "n_passages": len(ds.passages), "alpha": alpha, "fusion": fusion,
           "ingest_passages_per_s": rate, "tenant": tenant}
    if baseline:
        log("scoring the naive baseline")
        # The naive script fuses at 0.5, untuned, as such a script would.
        out["baseline"] = baseline_scores(ds, questions, NAIVE_ALPHA, max(k, 10))
    if swept:
        out["alpha_sweep"] = {str(a): v for a, v in swept.items()}
    if boosts:
        out["title_boost_sweep"] = {str(b): v for b, v in boosts.items()}
    if raw:
        out["raw_words"] = raw
    if bm25:
        out["bm25_sweep"] = bm25
    if misses is not None:
        out["hybrid_misses"] = misses
    if by_group:
        out["groups"] = by_group
        out["group_sizes"] = {g: sum(q.group == g for q in questions) for g in groups}
    return out


def markdown(result: dict, k: int) -> str:
    alpha = "the service's default" if result["alpha"] is None else result["alpha"]
    lines = [f"{result['n_queries']} queries over {result['n_passages']} passages (alpha {alpha}, "
             f"{result.get('fusion', 'relative')} fusion)", "",
             f"| mode | nDCG@10 | Recall@{k} | MRR@10 | p50 ms | p95 ms |", "|---|---|---|---|---|---|"]
    for mode, m in result["modes"].items():
        lines.append(f"| {mode} | {m['ndcg@10']:.3f} | {m[f'recall@{k}']:.3f} | {m['mrr@10']:.3f} | {m['p50_ms']:.0f} | {m['p95_ms']:.0f} |")
    for mode, m in result.get("baseline", {}).items():
        lines.append(f"| {mode} | {m['ndcg@10']:.3f} | {m[f'recall@{k}']:.3f} | {m['mrr@10']:.3f} | | |")
    if "baseline" in result and "hybrid" in result["modes"]:
        ahead = result["modes"]["hybrid"]["ndcg@10"] - result["baseline"]["naive hybrid"]["ndcg@10"]
        lines += ["", f"hybrid − naive hybrid: {ahead:+.3f} nDCG@10"]
    if result.get("groups"):
        modes = list(result["modes"])
        lines += ["", f"nDCG@10 / Recall@{k} by group:", "", "| group | n | " + " | ".join(modes) + " |", "|---|---|" + "---|" * len(modes)]
        for group, by_mode in result["groups"].items():
            n = result["group_sizes"][group] if "group_sizes" in result else ""
            lines.append(f"| {group} | {n} | " + " | ".join(f"{m['ndcg@10']:.3f} / {m[f'recall@{k}']:.3f}" for m in by_mode.values()) + " |")
    sweep = result.get("alpha_sweep")
    if sweep:
        fused = list(next(iter(sweep.values())))
        lines += ["", "nDCG@10 by alpha:", "", "| alpha | " + " | ".join(fused) + " |", "|---|" + "---|" * len(fused)]
        lines += [f"| {a} | " + " | ".join(f"{v[m]:.3f}" for m in fused) + " |" for a, v in sweep.items()]
        if "hybrid" in fused:
            best = max(sweep, key=lambda a: sweep[a]["hybrid"])
            lines += ["", f"Best hybrid alpha here: {best} (set it for a tenant with RAGLINE_RETRIEVAL_TENANT_ALPHA)."]
    if result.get("raw_words"):
        raw = result["raw_words"]
        lines += ["", "nDCG@10 with English BM25 over the words as written (no stemming, stop words kept), same tenant:", "",
                  "| " + " | ".join(raw) + " |", "|" + "---|" * len(raw), "| " + " | ".join(f"{v:.3f}" for v in raw.values()) + " |"]
    bm25 = result.get("bm25_sweep")
    if bm25:
        modes = list(next(iter(bm25.values())))
        lines += ["", "nDCG@10 by BM25 k1 / b (the collection's, for every tenant):", "",
                  "| k1 / b | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
        lines += [f"| {kb} | " + " | ".join(f"{v[m]:.3f}" for m in modes) + " |" for kb, v in bm25.items()]
    boosts = result.get("title_boost_sweep")
    if boosts:
        modes = list(next(iter(boosts.values())))
        lines += ["", "nDCG@10 by title boost:", "", "| title boost | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
        lines += [f"| {b} | " + " | ".join(f"{v[m]:.3f}" for m in modes) + " |" for b, v in boosts.items()]
    misses = result.get("hybrid_misses")
    if misses is not None:
        lines += ["", f"hybrid's questions whose passage is not first: {len(misses)} of {result['n_queries']}", "",
                  "| question | rank of its passage | ranked first |", "|---|---|---|"]
        lines += [f"| {m['question']} | {m['rank'] or 'not retrieved'} | {m['first']} |" for m in misses]
    return "\n".join(lines)
