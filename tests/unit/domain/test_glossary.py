"""A tenant's glossary: parsing, keyword expansion, and coverage by concept rather than by exact word."""

import pytest

from ragline.domain.glossary import NO_GLOSSARY, Glossary, concept_coverage
from ragline.domain.text import question_tokens

GLOSSARY = Glossary.parse("""
# comment lines and blank lines are skipped
连接池 / connection pool / pool
挂了 / 宕机 / down   # a trailing comment too
""")


def test_parse_reads_groups_and_refuses_a_group_of_one():
    assert GLOSSARY.groups == [("连接池", "connection pool", "pool"), ("挂了", "宕机", "down")]
    with pytest.raises(ValueError, match="glossary:2: a group needs at least two terms"):
        Glossary.parse("a / b\nlonely\n")


def test_expand_adds_only_the_synonyms_the_question_lacks():
    assert GLOSSARY.expand("线上Redis挂了怎么办？") == "线上Redis挂了怎么办？ 宕机 down"
    assert GLOSSARY.expand("Is the connection pool down?") == "Is the connection pool down? 连接池 挂了 宕机"
    # Latin terms match whole words only: "download" is not "down".
    assert GLOSSARY.expand("How do I download the report?") == "How do I download the report?"


def test_a_concept_is_covered_by_any_of_its_wordings_in_either_language():
    concepts = GLOSSARY.concepts("线上Redis挂了怎么办？")
    assert concept_coverage(concepts, "Redis 宕机或主从切换期间，应用会出现连接超时。") == pytest.approx(2 / 4)
    assert concept_coverage(concepts, "When Redis is down, payments return 503.") == pytest.approx(2 / 4)
    assert concept_coverage(concepts, "Kubernetes 的重启策略有三种。") == 0.0


def test_without_a_glossary_coverage_is_plain_word_overlap():
    question = "What is the default maximumPoolSize of HikariCP?"
    sentence = "Its default maximumPoolSize is 10 connections."
    words = set(question_tokens(question))
    assert [c.word for c in NO_GLOSSARY.concepts(question)] == list(dict.fromkeys(question_tokens(question)))
    assert concept_coverage(NO_GLOSSARY.concepts(question), sentence) == pytest.approx(2 / len(words))
