"""The `ragline` command: serve a stage, ingest documents, ask questions, run the demo."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys

import grpc
from google.protobuf.json_format import MessageToDict

from ragline.client import gateway_stub
from ragline.client.documents import LoadError, RawDocument, read_documents
from ragline.client.render import print_answer
from ragline.domain.strategies import STRATEGIES
from ragline.eval.datasets import FORMATS
from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import ragline_pb2, retrieval_pb2

SERVICES = ["router", "retrieval", "reranker", "grader", "generator", "orchestrator", "gateway"]
# Which stage a container of the one image is, when its command does not say (deploy/docker/Dockerfile).
SERVICE_ENV = "RAGLINE_SERVICE"
INGEST_BATCH = 32


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
    written = failed = 0
    for start in range(0, len(docs), INGEST_BATCH):
        batch = [retrieval_pb2.Document(id=d.id, title=d.title, text=d.text, source=d.source, metadata=d.metadata)
                 for d in docs[start : start + INGEST_BATCH]]
        try:
            resp = stub.IngestDocuments(ragline_pb2.IngestDocumentsRequest(documents=batch), metadata=meta, timeout=600)
        except grpc.RpcError as exc:
            return fail(exc)
        for r in resp.results:
            print(f"  {r.document_id}: {'error: ' + r.error if r.error else f'{r.chunks} chunks'}")
        written += resp.chunks_written
        failed += resp.documents_failed
    print(f"ingested {len(docs) - failed} documents ({written} chunks); {failed + len(errors)} failed or skipped")
    return 0 if failed == 0 else 1


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
    except ValueError:
        print(f"error: --alpha-sweep takes numbers separated by commas, got {args.alpha_sweep!r}", file=sys.stderr)
        return 2
    if any(not 0.0 <= a <= 1.0 for a in (args.alpha, *sweep)):
        print("error: alpha must be within [0, 1]", file=sys.stderr)
        return 2
    result = retrieval.run(load(args.format, args.data), args.limit, args.k, args.alpha, modes, keep=args.keep, sweep=sweep)
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
    p = sub.add_parser("ingest", help="ingest files, a folder, or JSONL ('-' for stdin) through the gateway")
    p.add_argument("path")
    p.add_argument("--format", choices=list(FORMATS),
                   help="read a public evaluation set's passages instead of files")
    p.set_defaults(fn=cmd_ingest)
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
    p.add_argument("--alpha", type=float, default=float(os.environ.get("RAGLINE_RETRIEVAL_DEFAULT_ALPHA", "0.5")),
                   help="hybrid weight of the vector side")
    p.add_argument("--alpha-sweep", default="", help="more alphas to score hybrid at, e.g. 0.3,0.5,0.7,0.9 (to tune a corpus)")
    p.add_argument("--modes", default=",".join(("bm25", "vector", "hybrid", "hybrid+rerank")))
    p.add_argument("--keep", action="store_true", help="keep the evaluation tenant instead of deleting it")
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
    p = sub.add_parser("demo", help="ingest the sample corpus and ask four kinds of question")
    p.set_defaults(fn=cmd_demo)
    args = parser.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
