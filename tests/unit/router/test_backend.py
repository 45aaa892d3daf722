"""The router's backend and servicer offline."""

from ragline.v1 import common_pb2


def chunk(cid: str, text: str, title: str = "t") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=cid, document_id=f"d-{cid}", title=title, text=text), score=1.0)


async def test_router_backend_keeps_verification_cues_and_asks_the_classifier_otherwise():
    from ragline.llm import Usage
    from services.router.backends import RouterBackend
    from services.router.classifier import MultiHopClassifier

    backend = RouterBackend(MultiHopClassifier(), None, fast_path_confidence=0.8, multihop_threshold=0.5)
    route, by = await backend.route("Is it true that the default maximumPoolSize of HikariCP is 10?", Usage())
    assert route.query_type == common_pb2.QUERY_TYPE_NEEDS_VERIFICATION and by == "rules"
    route, by = await backend.route(
        "Who was the first president of the association which published Journal of Psychotherapy Integration?", Usage())
    assert route.query_type == common_pb2.QUERY_TYPE_COMPLEX_REASONING and by == "classifier"
    route, by = await backend.route("In what country is Normandy located?", Usage())
    assert route.query_type == common_pb2.QUERY_TYPE_SIMPLE_FACT and by == "classifier"


async def test_offline_router_returns_its_decomposition_with_a_multihop_route():
    from ragline.v1 import common_pb2, router_pb2
    from services.router.backends import RouterBackend
    from services.router.classifier import MultiHopClassifier
    from services.router.server import Router

    router = Router(RouterBackend(MultiHopClassifier(), None, 0.8, 0.5, max_sub_questions=3))
    comparison = await router.Route(router_pb2.RouteRequest(query="Compare HikariCP and c3p0 in pool sizing"), None)  # type: ignore[arg-type]
    assert comparison.strategy == common_pb2.STRATEGY_MULTIHOP and comparison.decomposition == "comparison"
    assert [q.text for q in comparison.sub_questions] == ["HikariCP pool sizing", "c3p0 pool sizing"]
    simple = await router.Route(router_pb2.RouteRequest(query="What is the default pool size of HikariCP?"), None)  # type: ignore[arg-type]
    assert simple.strategy == common_pb2.STRATEGY_STANDARD and not simple.decomposition and not simple.sub_questions
