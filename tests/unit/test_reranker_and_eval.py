from ragline.eval.metrics import contains_answer, exact_match, f1, mrr_at_k, ndcg_at_k, recall_at_k
from services.reranker.features import NAMES, Candidate, featurize
from services.reranker.logic import DEFAULT_MODEL, LearnedScorer
from services.router.classifier import MultiHopClassifier


def test_features_have_one_column_per_name():
    rows = featurize("default pool size", [Candidate("Pools", "The default pool size is 10.", 1.0, 3.0, 0.9),
                                           Candidate("Cats", "Cats sleep.", 0.2, 0.0, 0.7)])
    assert rows.shape == (2, len(NAMES))
    assert rows[0, NAMES.index("coverage")] == 1.0 and rows[1, NAMES.index("coverage")] == 0.0


def test_learned_reranker_prefers_the_passage_that_answers():
    scorer = LearnedScorer(DEFAULT_MODEL)
    # Equal retrieval signals: what decides is which passage actually covers the question.
    good = Candidate("HikariCP", "HikariCP's default maximumPoolSize is 10 connections.", 0.8, 1.5, 0.85)
    bad = Candidate("Cats", "Cats sleep most of the day.", 0.8, 1.5, 0.85)
    s_bad, s_good = scorer.score("default maximumPoolSize of HikariCP", [bad, good])
    assert s_good > s_bad


def test_multihop_classifier_separates_bridge_from_single_questions():
    clf = MultiHopClassifier()
    multi = clf.probability("Who was the first president of the association which published Journal of Psychotherapy Integration?")
    single = clf.probability("In what country is Normandy located?")
    assert multi is not None and single is not None and multi > 0.5 > single
    assert clf.probability("存活探针失败会怎样？") is None


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


def test_alpha_per_tenant_overrides_the_default_but_not_the_request(monkeypatch):
    import pydantic
    import pytest

    from ragline.v1 import retrieval_pb2
    from services.retrieval.config import RetrievalSettings
    from services.retrieval.server import Retrieval

    monkeypatch.setenv("RAGLINE_RETRIEVAL_TENANT_ALPHA", '{"entities": 0.95}')
    service = Retrieval(RetrievalSettings(), store=None, embedder=None)  # type: ignore[arg-type]
    alpha_of = lambda **kw: service._search_args(retrieval_pb2.SearchRequest(query="q", **kw))[0]  # noqa: E731
    assert alpha_of(tenant="entities") == 0.95
    assert alpha_of(tenant="other") == 0.5
    assert alpha_of(tenant="entities", alpha=0.2) == 0.2
    monkeypatch.setenv("RAGLINE_RETRIEVAL_TENANT_ALPHA", '{"entities": 1.5}')
    with pytest.raises(pydantic.ValidationError, match="within"):
        RetrievalSettings()


def test_learned_reranker_turns_scores_into_calibrated_probabilities():
    scorer = LearnedScorer(DEFAULT_MODEL)
    low, mid, high = (scorer.probability(s) for s in (-5.0, 5.0, 12.0))
    assert low is not None and mid is not None and high is not None
    assert 0.0 < low < mid < high < 1.0


async def test_offline_grader_trusts_the_reranker_probability_and_falls_back_to_word_coverage():
    from ragline.llm import Usage
    from ragline.v1 import common_pb2
    from services.grader.backends import OfflineGrader
    from services.grader.config import GraderSettings

    def scored(text: str, probability: float | None = None) -> common_pb2.ScoredChunk:
        c = common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=text[:8], title="", text=text))
        if probability is not None:
            c.scores.relevance_probability = probability
        return c

    grader = OfflineGrader(GraderSettings())
    query = "default maximumPoolSize of HikariCP"
    verdicts = await grader.documents(query, [
        scored("HikariCP's default maximumPoolSize is 10.", probability=0.1),  # the words are there, the reranker says no
        scored("Pools hold ten connections unless configured.", probability=0.9),
        scored("HikariCP's default maximumPoolSize is 10."),  # not reranked: word coverage decides
        scored("Cats sleep."),
    ], Usage())
    assert [v.relevant for v in verdicts] == [False, True, True, False]


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
