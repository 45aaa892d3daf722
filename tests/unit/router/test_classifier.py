"""The learned multi-hop classifier."""

from services.router.classifier import MultiHopClassifier


def test_multihop_classifier_separates_bridge_from_single_questions():
    clf = MultiHopClassifier()
    multi = clf.probability("Who was the first president of the association which published Journal of Psychotherapy Integration?")
    single = clf.probability("In what country is Normandy located?")
    assert multi is not None and single is not None and multi > 0.5 > single
    assert clf.probability("存活探针失败会怎样？") is None
