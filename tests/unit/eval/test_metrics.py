"""Evaluation metrics, the QA scoring and the answerability measurement."""

from ragline.eval.metrics import contains_answer, exact_match, f1, mrr_at_k, ndcg_at_k, recall_at_k


def test_retrieval_metrics():
    relevant = {"a": 2, "b": 1}
    assert ndcg_at_k(["a", "b", "c"], relevant) == 1.0
    assert 0 < ndcg_at_k(["c", "b", "a"], relevant) < 1
    assert recall_at_k(["c", "a"], relevant, 10) == 0.5
    assert mrr_at_k(["c", "a"], relevant) == 0.5


def test_answer_metrics_normalise_english_and_chinese():
    assert exact_match("The France!", ["France"]) == 1.0
    assert contains_answer("It is in France [1].", ["france"]) == 1.0
    assert contains_answer("答案是踢爆。", ["踢爆"]) == 1.0
    assert 0 < f1("Paris France", ["France"]) < 1


def test_answerability_measurement_scores_separable_data_and_its_features():
    import numpy as np

    from ragline.eval.answerability import FEATURES, features, fit_logistic, roc_auc

    labels = np.asarray([1.0, 1.0, 0.0, 0.0])
    assert roc_auc(np.asarray([0.9, 0.8, 0.2, 0.1]), labels) == 1.0
    assert roc_auc(np.asarray([0.1, 0.2, 0.8, 0.9]), labels) == 0.0
    x = np.asarray([[2.0], [1.5], [-1.0], [-2.0]])
    assert roc_auc(fit_logistic(x, labels)(x), labels) == 1.0
    row = features("When did the Normans conquer England?",
                   "The Normans conquered England in 1066. They spoke Norman.", {"normans": 1.0, "england": 2.0})
    assert len(row) == len(FEATURES)
    assert row[FEATURES.index("coverage")] > 0.5 and row[FEATURES.index("asks_when_and_new_year")] == 1.0


def test_qa_scores_answers_and_writes_what_each_one_cost():
    from ragline.eval.datasets import Question
    from ragline.eval.qa import per_question_record, score_strategy
    from ragline.v1 import common_pb2

    found = Question("q1", "Who founded it?", {"p1": 1, "p2": 1}, ["Rollo"])
    missing = Question("q2", "Who ruled it?", {}, [], answerable=False)
    a1 = common_pb2.Answer(text="It was Rollo [1].", stage_calls=4, retrieved_documents=["p1", "x"],
                           strategy_used=common_pb2.STRATEGY_STANDARD)
    a2 = common_pb2.Answer(text="not found", not_found=True, stage_calls=6)
    scores = score_strategy([(found, a1, 10.0), (missing, a2, 30.0)])
    assert scores["acc"] == 1.0 and scores["support_recall@10"] == 0.5 and scores["stage_calls"] == 5.0
    assert scores["abstain_rate"] == 1.0 and scores["false_abstain_rate"] == 0.0
    record = per_question_record("auto", found, a1, 10.0)
    assert record["support_recall@10"] == 0.5 and record["acc"] == 1.0 and record["strategy_used"] == "standard"
    assert per_question_record("auto", missing, a2, 30.0)["support_recall@10"] is None


def test_an_english_answer_inside_a_chinese_one_is_found():
    # A Chinese question answered from an English sentence (or the reverse) is scored like any other answer.
    assert contains_answer("文档中的相关内容（原文为英文）：\nDependency caches are kept for 14 days. [1]", ["14 days"]) == 1.0
    assert contains_answer("From the documents (quoted in Chinese):\n全量备份保留 30 天。 [1]", ["30 天"]) == 1.0
    assert contains_answer("缓存保留 14 天。", ["14 days"]) == 0.0


def test_the_bilingual_set_loads_its_markdown_corpus_and_groups_questions_by_direction():
    from pathlib import Path

    from ragline.eval.datasets import load

    ds = load("bilingual", Path(__file__).resolve().parents[3] / "eval" / "data" / "ragline_bilingual")
    assert len(ds.passages) == 12 and all(p.content_type == "markdown" for p in ds.passages)
    groups = {g: sum(q.group == g for q in ds.questions) for g in {q.group for q in ds.questions}}
    assert groups == {"zh→zh": 36, "zh→en": 36, "en→zh": 36, "en→en": 36, "absent": 20}
    assert all(q.relevant and q.answers for q in ds.questions if q.answerable)
    assert not any(q.relevant for q in ds.questions if not q.answerable)
