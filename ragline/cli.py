"""The `ragline` command: serve a stage, ingest documents, ask questions, run the demo."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
from google.protobuf.json_format import MessageToDict
from tqdm import tqdm

from ragline.client import gateway_stub
from ragline.client.documents import LoadError, RawDocument, read_documents
from ragline.client.render import print_answer
from ragline.domain.access import InvalidGroups, split_groups
from ragline.domain.documents import batches, plan_sync
from ragline.domain.strategies import STRATEGIES
from ragline.eval.datasets import FORMATS
from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import ragline_pb2, ragline_pb2_grpc, retrieval_pb2

SERVICES = ["router", "retrieval", "reranker", "grader", "generator", "orchestrator", "gateway"]
# Which stage a container of the one image is, when its command does not say (deploy/docker/Dockerfile).
SERVICE_ENV = "RAGLINE_SERVICE"
INGEST_BATCH = 32
# Under the gateway's 64 MiB message limit, with room to spare.
INGEST_BATCH_BYTES = 24 * 1024 * 1024


def fail(exc: grpc.RpcError) -> int:
    print(f"error: {exc.code().name}: {exc.details()}", file=sys.stderr)  # type: ignore[attr-defined]
    return 1


def _service(args: argparse.Namespace) -> str:
    """The stage named on the command line, else RAGLINE_SERVICE (how an image's container says which it is)."""
    service = args.service or os.environ.get(SERVICE_ENV, "")
    if service not in SERVICES:
        raise SystemExit(f"error: name a service ({', '.join(SERVICES)}) or set {SERVICE_ENV}; got {service!r}")
    return service


def cmd_serve(args: argparse.Namespace) -> int:
    service = _service(args)
    module = "gateway.server" if service == "gateway" else f"services.{service}.server"
    asyncio.run(importlib.import_module(module).main())
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    """Exit 0 when the service's gRPC health check answers SERVING (a container's HEALTHCHECK), else 1."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    service = _service(args)
    port = os.environ.get(f"RAGLINE_{service.upper()}_PORT", str(DEFAULT_PORTS[service]))
    address = args.address or f"127.0.0.1:{port}"
    try:
        with grpc.insecure_channel(address) as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=args.timeout).status
    except grpc.RpcError as exc:
        print(f"{service} at {address}: {exc.code().name}", file=sys.stderr)  # type: ignore[attr-defined]
        return 1
    print(f"{service} at {address}: {health_pb2.HealthCheckResponse.ServingStatus.Name(status)}")
    return 0 if status == health_pb2.HealthCheckResponse.SERVING else 1


def _with_groups(docs: list[RawDocument], groups: str) -> list[RawDocument]:
    """The --groups option given to every file's document (JSONL documents keep their own metadata.access_groups)."""
    if groups:
        chosen = split_groups(groups)
        for doc in docs:
            doc.access_groups = sorted({*doc.access_groups, *chosen})
    return docs


def _send(stub: ragline_pb2_grpc.RaglineServiceStub, meta: list[tuple[str, str]], docs: list[RawDocument]) -> tuple[int, int]:
    """Ingest in batches under a progress bar (documents, rate, time left); (chunks written, documents failed)."""
    written = failed = 0
    # The bar only on a terminal: piped output stays one line per document.
    with tqdm(total=len(docs), unit="doc", file=sys.stderr, disable=not sys.stderr.isatty(), dynamic_ncols=True) as bar:
        for batch in batches(docs, INGEST_BATCH, INGEST_BATCH_BYTES, RawDocument.size):
            resp = stub.IngestDocuments(ragline_pb2.IngestDocumentsRequest(documents=[d.message() for d in batch]),
                                        metadata=meta, timeout=600)
            for r in resp.results:
                outcome = f"error: {r.error}" if r.error else "unchanged" if r.unchanged else f"{r.chunks} chunks"
                bar.write(f"  {r.document_id}: {outcome}", file=sys.stdout)
            written += resp.chunks_written
            failed += resp.documents_failed
            bar.update(len(batch))
    return written, failed


def cmd_ingest(args: argparse.Namespace) -> int:
    if args.format:
        from ragline.eval.datasets import load

        ds = load(args.format, args.path)
        docs = [RawDocument(id=p.id, title=p.title, text=p.text, source=f"{ds.name}:{p.id}", metadata={"dataset": ds.name})
                for p in ds.passages]
        errors: list[LoadError] = []
    else:
        docs, errors = read_documents(args.path)
    for err in errors:
        print(f"  skipped {err.where}: {err.message}")
    if not docs:
        print(f"error: no documents found in {args.path}", file=sys.stderr)
        return 2
    stub, meta = gateway_stub()
    try:
        written, failed = _send(stub, meta, _with_groups(docs, args.groups))
    except grpc.RpcError as exc:
        return fail(exc)
    print(f"ingested {len(docs) - failed} documents ({written} chunks); {failed + len(errors)} failed or skipped")
    return 0 if failed == 0 else 1


def _listed(stub: ragline_pb2_grpc.RaglineServiceStub, meta: list[tuple[str, str]],
            sync_root: str = "") -> Iterator[retrieval_pb2.DocumentInfo]:
    """Every document the key can read (of one sync root, when given), page by page."""
    token = ""
    while True:
        page = stub.ListDocuments(ragline_pb2.ListDocumentsRequest(sync_root=sync_root, page_size=1000, page_token=token),
                                  metadata=meta, timeout=60)
        yield from page.documents
        token = page.next_page_token
        if not token:
            return


def cmd_sync(args: argparse.Namespace) -> int:
    """Keep a folder and the index in step: add new files, replace changed ones, delete those gone from the folder
    (only documents this folder's syncs put there). Run again after an interruption: it ends in the same state."""
    root = Path(args.path)
    if not root.is_dir():
        print(f"error: {args.path} is not a folder", file=sys.stderr)
        return 2
    sync_root = str(root.resolve())
    docs, errors = read_documents(args.path)
    for doc in _with_groups(docs, args.groups):
        doc.sync_root = sync_root
    for err in errors:
        print(f"  skipped {err.where}: {err.message}")
    stub, meta = gateway_stub()
    try:
        indexed = {d.id: d.content_hash for d in _listed(stub, meta, sync_root)}
        plan = plan_sync({d.id: d.content_hash() for d in docs}, indexed)
        print(f"sync {sync_root}: {len(plan.add)} new, {len(plan.change)} changed, {len(plan.unchanged)} unchanged, "
              f"{len(plan.delete)} gone")
        for label, ids in (("add", plan.add), ("replace", plan.change), ("delete", plan.delete)):
            for doc_id in ids:
                print(f"  {label} {doc_id}")
        if args.dry_run:
            return 0
        changed = set(plan.add + plan.change)
        written, failed = _send(stub, meta, [d for d in docs if d.id in changed])
        for doc_id in plan.delete:
            stub.DeleteDocument(ragline_pb2.DeleteDocumentRequest(document_id=doc_id), metadata=meta, timeout=60)
    except grpc.RpcError as exc:
        return fail(exc)
    print(f"synced: {len(plan.add) + len(plan.change) - failed} written ({written} chunks), {len(plan.delete)} deleted, "
          f"{failed} failed")
    return 0 if failed == 0 else 1


def cmd_documents(args: argparse.Namespace) -> int:
    stub, meta = gateway_stub()
    try:
        if args.action == "list":
            for d in _listed(stub, meta):
                groups = ",".join(d.access_groups) or "everyone"
                print(f"{d.id}\t{d.format}\t{d.chunks} chunks\t{d.updated_at}\t{groups}\t{d.title}")
            return 0
        if not args.id:
            print(f"error: documents {args.action} needs a document id", file=sys.stderr)
            return 2
        if args.action == "get":
            doc = stub.GetDocument(ragline_pb2.GetDocumentRequest(document_id=args.id), metadata=meta, timeout=60).document
            print(json.dumps(MessageToDict(doc, preserving_proto_field_name=True), ensure_ascii=False, indent=2))
        else:
            resp = stub.DeleteDocument(ragline_pb2.DeleteDocumentRequest(document_id=args.id), metadata=meta, timeout=60)
            print(f"deleted {args.id} ({resp.chunks_deleted} chunks)")
    except grpc.RpcError as exc:
        return fail(exc)
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    stub, meta = gateway_stub()
    try:
        resp = stub.Answer(ragline_pb2.AnswerRequest(query=args.question, strategy=STRATEGIES[args.strategy]),
                           metadata=meta, timeout=args.timeout)
    except grpc.RpcError as exc:
        return fail(exc)
    if args.json:
        print(json.dumps(MessageToDict(resp.answer, preserving_proto_field_name=True), ensure_ascii=False, indent=2))
    else:
        print_answer(resp.answer)
    return 0


def cmd_eval_retrieval(args: argparse.Namespace) -> int:
    from ragline.eval import retrieval
    from ragline.eval.datasets import load

    modes = tuple(m for m in args.modes.split(",") if m)
    unknown = set(modes) - set(retrieval.MODES)
    if unknown:
        print(f"error: unknown modes {sorted(unknown)}; use {', '.join(retrieval.MODES)}", file=sys.stderr)
        return 2
    try:
        sweep = tuple(float(a) for a in args.alpha_sweep.split(",") if a.strip())
        boosts = tuple(float(b) for b in args.title_boost_sweep.split(",") if b.strip())
        bm25 = tuple((float(pair.split(":")[0]), float(pair.split(":")[1])) for pair in args.bm25_sweep.split(",") if pair.strip())
    except (ValueError, IndexError):
        print("error: --alpha-sweep and --title-boost-sweep take numbers separated by commas, --bm25-sweep k1:b pairs",
              file=sys.stderr)
        return 2
    if any(not (0.0 < k1 <= 5.0 and 0.0 <= b <= 1.0) for k1, b in bm25):
        print("error: BM25 k1 must be within (0, 5] and b within [0, 1]", file=sys.stderr)
        return 2
    if any(not 0.0 < b <= 10.0 for b in boosts):
        print("error: a title boost must be within (0, 10]", file=sys.stderr)
        return 2
    if any(not 0.0 <= a <= 1.0 for a in ((args.alpha if args.alpha is not None else 0.5), *sweep)):
        print("error: alpha must be within [0, 1]", file=sys.stderr)
        return 2
    result = retrieval.run(load(args.format, args.data), args.limit, args.k, args.alpha, modes, keep=args.keep, sweep=sweep,
                           baseline=args.baseline, boost_sweep=boosts, raw_words=args.raw_words, bm25_sweep=bm25,
                           weaviate_url=args.weaviate_url, fusion=args.fusion, show_misses=args.misses)
    print(json.dumps(result, indent=2) if args.json else retrieval.markdown(result, args.k))
    return 0


def cmd_eval_qa(args: argparse.Namespace) -> int:
    from ragline.eval import qa
    from ragline.eval.datasets import load

    strategies = [s for s in args.strategy.split(",") if s]
    unknown = set(strategies) - set(STRATEGIES)
    if unknown:
        print(f"error: unknown strategies {sorted(unknown)}; use {', '.join(STRATEGIES)}", file=sys.stderr)
        return 2
    result = qa.run(load(args.format, args.data), strategies, args.limit, keep=args.keep, per_question=args.per_question)
    print(json.dumps(result, indent=2) if args.json else qa.markdown(result))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    try:
        from ragline.dev.demo import run_demo
    except ImportError:
        print("error: the demo runs from a checkout of ragline (`make demo`), not from the installed package", file=sys.stderr)
        return 2
    return run_demo()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragline", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="run one service in the foreground (default: $RAGLINE_SERVICE)")
    p.add_argument("service", nargs="?", choices=SERVICES)
    p.set_defaults(fn=cmd_serve)
    p = sub.add_parser("health", help="exit 0 when a service answers SERVING to its gRPC health check (default: $RAGLINE_SERVICE)")
    p.add_argument("service", nargs="?", choices=SERVICES)
    p.add_argument("--address", help="host:port (default: 127.0.0.1 and the service's port)")
    p.add_argument("--timeout", type=float, default=3.0)
    p.set_defaults(fn=cmd_health)
    groups_help = "access groups for these documents, 'a|b' (the API key must be in them); default: the whole tenant"
    p = sub.add_parser("ingest", help="ingest files or folders (PDF, Word, PowerPoint, Excel, CSV, Markdown, text, HTML, "
                                      "code) or JSONL ('-' for stdin) through the gateway")
    p.add_argument("path")
    p.add_argument("--format", choices=list(FORMATS),
                   help="read a public evaluation set's passages instead of files")
    p.add_argument("--groups", default="", help=groups_help)
    p.set_defaults(fn=cmd_ingest)
    p = sub.add_parser("sync", help="keep a folder and the index in step: add, replace and delete what changed")
    p.add_argument("path")
    p.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    p.add_argument("--groups", default="", help=groups_help)
    p.set_defaults(fn=cmd_sync)
    p = sub.add_parser("documents", help="list the documents this key can read, or get or delete one")
    p.add_argument("action", choices=["list", "get", "delete"])
    p.add_argument("id", nargs="?", default="")
    p.set_defaults(fn=cmd_documents)
    p = sub.add_parser("ask", help="ask a question through the gateway")
    p.add_argument("question")
    p.add_argument("--strategy", choices=list(STRATEGIES), default="auto")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_ask)
    ev = sub.add_parser("eval", help="evaluate on public data sets").add_subparsers(dest="what", required=True)
    p = ev.add_parser("retrieval", help="nDCG@10, Recall@k, MRR@10 and latency of bm25, vector, hybrid, hybrid+rerank")
    p.add_argument("--format", choices=list(FORMATS), required=True)
    p.add_argument("--data", required=True, help="the data set's file or folder")
    p.add_argument("--limit", type=int, default=0, help="at most this many queries (0: all)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--alpha", type=float, default=None,
                   help="hybrid weight of the vector side (default: the retrieval service's own, by the question's language)")
    p.add_argument("--alpha-sweep", default="", help="more alphas to score hybrid at, e.g. 0.3,0.5,0.7,0.9 (to tune a corpus)")
    p.add_argument("--title-boost-sweep", default="",
                   help="title boosts to score bm25 and hybrid at, e.g. 1,2,3 (the default is RAGLINE_RETRIEVAL_BM25_TITLE_BOOST)")
    p.add_argument("--bm25-sweep", default="",
                   help="BM25 k1:b pairs to score bm25 and hybrid at (and at each --alpha-sweep alpha), e.g. 0.9:0.4,1.2:0.75; "
                        "Weaviate keeps them per collection, so this changes them for every tenant while it runs, then puts them back")
    p.add_argument("--weaviate-url", default="http://127.0.0.1:8080", help="for --bm25-sweep: the retrieval service's Weaviate")
    p.add_argument("--misses", action="store_true",
                   help="list hybrid's questions whose relevant passage is not ranked first, with the rank it had")
    p.add_argument("--fusion", choices=("relative", "ranked"), default="relative",
                   help="how hybrid combines BM25 and vector: Weaviate's relative-score fusion (the service's default) or ranked fusion")
    p.add_argument("--raw-words", action="store_true",
                   help="also score bm25 and hybrid over the English words as written (title, text), for comparison")
    p.add_argument("--modes", default=",".join(("bm25", "vector", "hybrid", "hybrid+rerank")))
    p.add_argument("--keep", action="store_true", help="keep the evaluation tenant instead of deleting it")
    p.add_argument("--baseline", action="store_true",
                   help="also score a naive hybrid (rank-bm25, the same embedder's cosine, relative-score fusion) on the same data")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_eval_retrieval)
    p = ev.add_parser("qa", help="answer quality, support recall, abstention, cost and latency per strategy")
    p.add_argument("--format", choices=[f for f in FORMATS if f != "beir"], required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--strategy", default="standard,multihop,selfrag,combined,auto")
    p.add_argument("--limit", type=int, default=0, help="at most this many questions (0: all)")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--per-question", metavar="PATH", help="also write one JSON line per question and strategy")
    p.set_defaults(fn=cmd_eval_qa)
    p = sub.add_parser("demo", help="ingest the sample corpus and ask five kinds of question")
    p.set_defaults(fn=cmd_demo)
    args = parser.parse_args(argv)
    try:
        return int(args.fn(args))
    except InvalidGroups as exc:
        print(f"error: --groups: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
