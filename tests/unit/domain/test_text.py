"""Language detection, tokens, question framing and sentences."""

from ragline.domain.text import detect_language, sentences, tokens
from ragline.v1 import common_pb2


def chunk(cid: str, text: str, title: str = "t") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=cid, document_id=f"d-{cid}", title=title, text=text), score=1.0)


def test_language_and_tokens():
    assert detect_language("连接池耗尽怎么办") == "zh"
    assert detect_language("What is a pool?") == "en"
    assert "连接池" in tokens("连接池耗尽怎么办") or "连接" in tokens("连接池耗尽怎么办")
    assert tokens("What is the pool size?") == ["pool", "size"]


def test_sentences_split_chinese_and_english():
    assert sentences("第一句。第二句！Third one. Fourth?") == ["第一句。", "第二句！", "Third one.", "Fourth?"]


def test_question_tokens_leave_out_how_the_question_is_framed():
    from ragline.domain.text import question_tokens

    assert question_tokens("Could you please tell me, according to our docs, what the default maximumPoolSize is?") == [
        "default", "maximumpoolsize"]
    assert question_tokens("麻烦告诉我一下，按照公司的运维手册，Redis 宕机以后第一步应该做什么？")[:2] == ["redis", "宕机"]
    assert question_tokens("请帮我查一下 HikariCP 默认的最大连接数是多少？") == ["hikaricp", "默认", "最大", "连接数"]
    # Content that only looks like framing stays.
    assert question_tokens("Who is the author of Please Please Me?") == ["author", "please", "please"]
    assert question_tokens("What did Nietzsche tell his sister?") == ["nietzsche", "tell", "sister"]


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
