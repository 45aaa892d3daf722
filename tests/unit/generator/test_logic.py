"""The offline generator: extractive answers, cross-language quotes, rewrites."""

from ragline.domain.answers import NOT_FOUND
from ragline.domain.glossary import Glossary
from ragline.v1 import common_pb2
from services.generator.logic import LEAD_IN, extract_answer, rewrite


def chunk(cid: str, text: str, title: str = "t") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=cid, document_id=f"d-{cid}", title=title, text=text), score=1.0)


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


def test_extractive_answer_cites_its_sentences():
    ctx = [chunk("a", "HikariCP is a pool. Its default maximumPoolSize is 10 connections."), chunk("b", "Unrelated text about cats.")]
    text, cites, not_found = extract_answer("What is the default maximumPoolSize of HikariCP?", ctx, 2, 0.2)
    assert not not_found
    assert "10 connections" in text and "[1]" in text
    assert cites[0].chunk_id == "a" and "maximumPoolSize" in cites[0].quote


def test_extractive_answer_says_not_found_in_the_question_language():
    text, cites, not_found = extract_answer("Redis 分片数量是多少？", [chunk("a", "Cats sleep a lot.")], 2, 0.2)
    assert not_found and text == NOT_FOUND["zh"] and not cites


def test_rewrite_adds_feedback_terms_and_differs_each_time():
    fb = [chunk("a", "HikariCP connectionTimeout defaults to 30 seconds", title="HikariCP")]
    first = rewrite("pool wait limit", [], fb)
    second = rewrite("pool wait limit", [first], fb)
    assert first != "pool wait limit" and second != first


def test_a_glossary_lets_a_colloquial_question_find_its_sentences_and_quotes_in_the_other_language_get_a_lead_in():
    glossary = Glossary.parse("挂了 / 宕机 / down\n线上 / production")
    runbook = common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id="r", text="Redis 宕机或主从切换期间，应用会出现连接超时。"), score=1.0)
    assert extract_answer("线上Redis挂了怎么办？", [runbook], 3, 0.3)[2], "plain word overlap finds nothing"
    text, cites, not_found = extract_answer("线上Redis挂了怎么办？", [runbook], 3, 0.3, glossary=glossary)
    assert not not_found and text == "Redis 宕机或主从切换期间，应用会出现连接超时。 [1]" and cites[0].chunk_id == "r"
    text, _, not_found = extract_answer("What should I do when Redis goes down in production?", [runbook], 3, 0.3,
                                        glossary=glossary)
    assert not not_found and text.startswith(LEAD_IN["en"] + "\n") and "Redis 宕机" in text


def test_a_confident_passage_in_the_other_language_is_quoted_by_its_sentences_closest_in_meaning():
    passage = common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id="es", document_id="es.md", text=(
        "Elasticsearch stops allocating shards above the low disk watermark of 85%. "
        "At the flood stage of 95% every index on the node becomes read-only. Reindex jobs run with slices=auto.")))
    passage.scores.relevance_probability = 0.8

    def similarity(question: str, texts: list[str]) -> list[float]:
        return [0.9 if "read-only" in t else 0.8 for t in texts]

    text, cites, not_found = extract_answer("磁盘满到哪个程度索引会变成只读？", [passage], 3, 0.3,
                                            cross_lingual_min_probability=0.5, similarity=similarity)
    assert not not_found and cites[0].document_id == "es.md"
    assert text == LEAD_IN["zh"] + "\nAt the flood stage of 95% every index on the node becomes read-only. [1]"
    # Without an embedding the passage's opening sentences are quoted, as before.
    assert "85%" in extract_answer("磁盘满到哪个程度索引会变成只读？", [passage], 3, 0.3, cross_lingual_min_probability=0.5)[0]


async def test_a_models_citations_are_checked_markers_out_of_range_removed_and_an_uncited_answer_flagged():
    from ragline.llm import Usage
    from ragline.v1 import generator_pb2
    from services.generator.backends import LlmGenerator
    from services.generator.config import GeneratorSettings

    class Model:
        def __init__(self, reply: str) -> None:
            self.reply = reply

        async def text(self, name: str, system: str, user: str, usage: Usage, timeout_s: float | None = None,
                       on_delta=None) -> str:  # type: ignore[no-untyped-def]
            for word in self.reply.split(" "):
                if on_delta is not None:
                    on_delta(word + " ")
            return self.reply

    context = [chunk("a", "HikariCP's default maximumPoolSize is 10."), chunk("b", "Redis outages return 503.")]
    inp = generator_pb2.GenerationInput(query="What is the default pool size?", context=context)
    cited = await LlmGenerator(Model("The default is 10 [1] [7], not 503 [2]."), GeneratorSettings()).generate(inp, Usage())  # type: ignore[arg-type]
    assert cited.answer == "The default is 10 [1] , not 503 [2]." and [c.chunk_id for c in cited.citations] == ["a", "b"]
    assert not cited.uncited
    only_first = await LlmGenerator(Model("It is 10 [1]."), GeneratorSettings()).generate(inp, Usage())  # type: ignore[arg-type]
    assert [c.chunk_id for c in only_first.citations] == ["a"]
    uncited = await LlmGenerator(Model("It is ten [9]."), GeneratorSettings()).generate(inp, Usage())  # type: ignore[arg-type]
    assert uncited.uncited and not uncited.citations and uncited.answer == "It is ten ."
