from ragline.decomposition import decompose
from ragline.text import detect_language, sentences, tokens
from ragline.v1 import common_pb2
from services.generator.logic import NOT_FOUND, extract_answer, rewrite
from services.grader.logic import relevance, support, usefulness
from services.router.logic import route_by_rules


def chunk(cid: str, text: str, title: str = "t") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=cid, document_id=f"d-{cid}", title=title, text=text), score=1.0)


def test_language_and_tokens():
    assert detect_language("连接池耗尽怎么办") == "zh"
    assert detect_language("What is a pool?") == "en"
    assert "连接池" in tokens("连接池耗尽怎么办") or "连接" in tokens("连接池耗尽怎么办")
    assert tokens("What is the pool size?") == ["pool", "size"]


def test_sentences_split_chinese_and_english():
    assert sentences("第一句。第二句！Third one. Fourth?") == ["第一句。", "第二句！", "Third one.", "Fourth?"]


def test_router_rules_cover_each_query_type():
    cases = {
        "你好": common_pb2.QUERY_TYPE_NO_RETRIEVAL,
        "Write a short poem about Redis": common_pb2.QUERY_TYPE_OPEN_CREATIVE,
        "Compare HikariCP and c3p0 in startup time": common_pb2.QUERY_TYPE_COMPLEX_REASONING,
        "存活探针失败是否一定会导致重启？": common_pb2.QUERY_TYPE_NEEDS_VERIFICATION,
        "What is the default pool size of HikariCP?": common_pb2.QUERY_TYPE_SIMPLE_FACT,
        "What storage does the service use, and why did its pool run out?": common_pb2.QUERY_TYPE_COMPLEX_REASONING,
    }
    for query, expected in cases.items():
        assert route_by_rules(query).query_type == expected, query


def test_router_extracts_doc_type_filter_and_intent():
    route = route_by_rules("在运维手册里，Redis 宕机怎么办？")
    assert route.filters == {"doc_type": ["markdown"]}
    assert route.intent == "troubleshoot"
    assert route_by_rules("Where in the source code is the pool size set?").filters == {"doc_type": ["code"]}
    # Words that only look like hints: a ruling class, a function served, the documents in general.
    for query in ("Who was the ruling class ahead of the Normans?", "What function does the liveness probe serve?",
                  "文档中提到的连接池大小是多少？", "当注册中心更换时，代码需不需要进行修改？"):
        assert route_by_rules(query).filters == {}, query


def test_a_passage_in_the_other_language_is_quoted_only_when_the_reranker_is_confident():
    english = chunk("a", "HikariCP is the default pool of Spring Boot. Its default maximumPoolSize is 10 connections.")
    question = "HikariCP 默认的最大连接数是多少？"
    english.scores.relevance_probability = 0.7
    text, cites, not_found = extract_answer(question, [english], 3, 0.3, cross_lingual_min_probability=0.5)
    assert not not_found and "maximumPoolSize is 10" in text and text.endswith("[1]") and cites[0].chunk_id == "a"
    english.scores.relevance_probability = 0.2
    assert extract_answer(question, [english], 3, 0.3, cross_lingual_min_probability=0.5)[2]
    # Same language and no sentence close enough: still not found, however confident the reranker.
    chinese = chunk("b", "Redis 故障时先保护上游服务。")
    chinese.scores.relevance_probability = 0.9
    assert extract_answer("Redis 集群的分片数量是多少？", [chinese], 3, 0.5, cross_lingual_min_probability=0.5)[2]


def test_question_tokens_leave_out_how_the_question_is_framed():
    from ragline.text import question_tokens

    assert question_tokens("Could you please tell me, according to our docs, what the default maximumPoolSize is?") == [
        "default", "maximumpoolsize"]
    assert question_tokens("麻烦告诉我一下，按照公司的运维手册，Redis 宕机以后第一步应该做什么？")[:2] == ["redis", "宕机"]
    assert question_tokens("请帮我查一下 HikariCP 默认的最大连接数是多少？") == ["hikaricp", "默认", "最大", "连接数"]
    # Content that only looks like framing stays.
    assert question_tokens("Who is the author of Please Please Me?") == ["author", "please", "please"]
    assert question_tokens("What did Nietzsche tell his sister?") == ["nietzsche", "tell", "sister"]


def test_extractive_answer_cites_its_sentences():
    ctx = [chunk("a", "HikariCP is a pool. Its default maximumPoolSize is 10 connections."), chunk("b", "Unrelated text about cats.")]
    text, cites, not_found = extract_answer("What is the default maximumPoolSize of HikariCP?", ctx, 2, 0.2)
    assert not not_found
    assert "10 connections" in text and "[1]" in text
    assert cites[0].chunk_id == "a" and "maximumPoolSize" in cites[0].quote


def test_extractive_answer_says_not_found_in_the_question_language():
    text, cites, not_found = extract_answer("Redis 分片数量是多少？", [chunk("a", "Cats sleep a lot.")], 2, 0.2)
    assert not_found and text == NOT_FOUND["zh"] and not cites


def test_decompose_comparisons_and_conjunctions():
    subs, kind = decompose("Compare HikariCP and c3p0 in startup time", 3)
    assert kind == "comparison" and [s for s, _ in subs] == ["HikariCP startup time", "c3p0 startup time"]
    subs, kind = decompose("Were Scott Derrickson and Ed Wood of the same nationality?", 3)
    assert kind == "comparison" and len(subs) == 2
    subs, kind = decompose("Who founded the company? When was it founded?", 3)
    assert kind == "conjunction" and len(subs) == 2
    subs, kind = decompose("What is a pool?", 3)
    assert kind == "single" and len(subs) == 1


def test_decompose_respects_the_hop_bound():
    subs, _ = decompose("A? B? C? D? E?", 2)
    assert len(subs) == 2


def test_rewrite_adds_feedback_terms_and_differs_each_time():
    fb = [chunk("a", "HikariCP connectionTimeout defaults to 30 seconds", title="HikariCP")]
    first = rewrite("pool wait limit", [], fb)
    second = rewrite("pool wait limit", [first], fb)
    assert first != "pool wait limit" and second != first


def test_grader_scores():
    assert relevance("HikariCP pool size", "Pools", "HikariCP default pool size is 10") == 1.0
    assert relevance("HikariCP pool size", "Cats", "cats sleep") == 0.0
    assert support("The pool size is 10 [1]", ["HikariCP default pool size is 10"]) == 1.0
    assert support("The moon is made of cheese", ["HikariCP default pool size is 10"]) < 0.5
    assert usefulness("pool size", "") == 0.0


def test_sentences_join_wrapped_lines():
    text = (
        "HikariCP is the default pool. Its default maximumPoolSize is 10 connections and\n"
        "its timeout is 30 seconds.\n\n存活探针失败会导致容器\n被重启。"
    )
    assert sentences(text) == [
        "HikariCP is the default pool.",
        "Its default maximumPoolSize is 10 connections and its timeout is 30 seconds.",
        "存活探针失败会导致容器被重启。",
    ]


def test_decompose_keeps_the_question_word_of_a_conjunction():
    subs, kind = decompose("What storage does the payments service use, and why did its pool run out?", 3)
    assert kind == "conjunction"
    assert [s for s, _ in subs] == ["What storage does the payments service use", "why did its pool run out"]


def test_bridge_entities_name_what_the_question_does_not():
    from services.orchestrator.bridging import bridge_entities

    text = ("The Journal of Psychotherapy Integration is published by the American Psychological Association "
            "on behalf of the Society for the Exploration of Psychotherapy Integration.")
    question = "Who was the first president of the association which published Journal of Psychotherapy Integration?"
    assert bridge_entities(question, text) == ["American Psychological Association",
                                               "Society for the Exploration of Psychotherapy Integration"]
    zh = bridge_entities("支付服务用什么连接池？", "支付服务使用 HikariCP 连接池，事务保存在 PostgreSQL 中。")
    assert "HikariCP" in zh


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
