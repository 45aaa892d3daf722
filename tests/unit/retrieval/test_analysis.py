from services.retrieval.analysis import english_copy, english_terms, keyword_query


def test_english_is_stemmed_without_stop_words() -> None:
    assert english_terms("The connection pools are configured") == ["connect", "pool", "configur"]
    assert english_copy("Configuring a pool") == english_copy("configured pools") == "configur pool"


def test_possessives_and_case_are_dropped() -> None:
    assert english_terms("Redis's STUDIES") == english_terms("redis studies") == ["redi", "studi"]


def test_chinese_is_left_to_the_chinese_copy() -> None:
    assert english_copy("线上Redis挂了怎么办") == "redi"
    assert keyword_query("线上Redis挂了怎么办").split() == ["redi", "线上", "挂了怎么办"]
    assert keyword_query("数据库连接池怎么配") == "数据库连接池怎么配"


def test_a_query_of_stop_words_has_no_terms() -> None:
    assert keyword_query("to be or not to be") == ""
