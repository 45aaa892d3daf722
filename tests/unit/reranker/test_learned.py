"""The learned reranker: its features, its ranking and its calibration."""

from services.reranker.features import NAMES, Candidate, featurize
from services.reranker.logic import DEFAULT_MODEL, LearnedScorer


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


def test_learned_reranker_turns_scores_into_calibrated_probabilities():
    scorer = LearnedScorer(DEFAULT_MODEL)
    low, mid, high = (scorer.probability(s) for s in (-5.0, 5.0, 12.0))
    assert low is not None and mid is not None and high is not None
    assert 0.0 < low < mid < high < 1.0
