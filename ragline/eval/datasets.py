"""Readers for the public evaluation formats: BEIR, HotpotQA, MuSiQue and SQuAD (also CMRC 2018, DRCD), and the
project's own bilingual set (eval/data/ragline_bilingual)."""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

FORMATS = ("beir", "hotpotqa", "musique", "squad", "bilingual")


@dataclass
class Passage:
    id: str
    title: str
    text: str
    # How retrieval chunks it: the public sets are plain paragraphs, the bilingual corpus is Markdown.
    content_type: str = "text"


@dataclass
class Question:
    id: str
    text: str
    # passage id -> graded relevance (> 0 is relevant)
    relevant: dict[str, int] = field(default_factory=dict)
    answers: list[str] = field(default_factory=list)
    answerable: bool = True
    # "bridge", "comparison", "2hop", ... where the data set says so
    kind: str = ""
    # What the figures are also reported by, where the data set has it: the bilingual set's direction, "zh→en".
    group: str = ""


@dataclass
class Dataset:
    name: str
    passages: list[Passage]
    questions: list[Question]


def _passage_id(title: str, text: str) -> str:
    return hashlib.sha1(f"{title}\x00{text}".encode()).hexdigest()[:16]


def _load_json_or_jsonl(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_beir(folder: Path) -> Dataset:
    passages = [Passage(str(r["_id"]), r.get("title", ""), r["text"])
                for r in _load_json_or_jsonl(folder / "corpus.jsonl")]
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / "test.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    questions = [Question(str(q["_id"]), q["text"], {k: v for k, v in qrels.get(str(q["_id"]), {}).items() if v > 0})
                 for q in _load_json_or_jsonl(folder / "queries.jsonl")]
    return Dataset("beir", passages, questions)


def load_hotpotqa(path: Path) -> Dataset:
    by_id: dict[str, Passage] = {}
    questions = []
    for i, rec in enumerate(_load_json_or_jsonl(path)):
        title_to_id = {}
        for title, sents in rec["context"]:
            text = "".join(sents).strip()
            pid = _passage_id(title, text)
            by_id.setdefault(pid, Passage(pid, title, text))
            title_to_id[title] = pid
        gold = {title_to_id[t]: 1 for t, _ in rec["supporting_facts"] if t in title_to_id}
        questions.append(Question(str(rec.get("_id", i)), rec["question"], gold, [rec["answer"]], kind=rec.get("type", "")))
    return Dataset("hotpotqa", list(by_id.values()), questions)


def load_musique(path: Path) -> Dataset:
    by_id: dict[str, Passage] = {}
    questions = []
    for i, rec in enumerate(_load_json_or_jsonl(path)):
        gold = {}
        for para in rec["paragraphs"]:
            pid = _passage_id(para["title"], para["paragraph_text"])
            by_id.setdefault(pid, Passage(pid, para["title"], para["paragraph_text"]))
            if para.get("is_supporting"):
                gold[pid] = 1
        answers = [rec["answer"], *rec.get("answer_aliases", [])]
        hops = len(rec.get("question_decomposition", [])) or 2
        questions.append(Question(str(rec.get("id", i)), rec["question"], gold, answers,
                                  answerable=rec.get("answerable", True), kind=f"{hops}hop"))
    return Dataset("musique", list(by_id.values()), questions)


def load_squad(path: Path) -> Dataset:
    """SQuAD v1/v2 JSON (also CMRC 2018 and DRCD): the relevant passage is the question's paragraph."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    passages, questions = [], []
    for a, article in enumerate(data):
        for p, para in enumerate(article["paragraphs"]):
            pid = f"{a}-{p}"
            passages.append(Passage(pid, article.get("title", ""), para["context"]))
            for qa in para["qas"]:
                impossible = bool(qa.get("is_impossible", False))
                answers = list(dict.fromkeys(ans["text"] for ans in qa.get("answers", [])))
                questions.append(Question(str(qa["id"]), qa["question"], {} if impossible else {pid: 1}, answers,
                                          answerable=not impossible, kind="unanswerable" if impossible else "single"))
    return Dataset("squad", passages, questions)


def load_bilingual(folder: Path) -> Dataset:
    """The project's bilingual set: Markdown documents in corpus/ (a passage each, chunked by headings) and
    questions.jsonl, each question grouped by direction: its language → its gold document's ("zh→en"), or "absent"."""
    passages = []
    for path in sorted((folder / "corpus").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), path.stem)
        passages.append(Passage(path.name, title, text, content_type="markdown"))
    questions = []
    for rec in _load_json_or_jsonl(folder / "questions.jsonl"):
        group = f"{rec['lang']}→{rec['doc_lang']}" if rec["answerable"] else "absent"
        questions.append(Question(rec["id"], rec["question"], {d: 1 for d in rec["documents"]}, rec["answers"],
                                  answerable=rec["answerable"], kind=rec["style"], group=group))
    return Dataset("bilingual", passages, questions)


def load(fmt: str, path: str | Path) -> Dataset:
    loaders = {"beir": load_beir, "hotpotqa": load_hotpotqa, "musique": load_musique, "squad": load_squad,
               "bilingual": load_bilingual}
    if fmt not in loaders:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    ds = loaders[fmt](Path(path))
    # A few public records have a blank question (one in the CMRC 2018 trial set): nothing to ask.
    ds.questions = [q for q in ds.questions if q.text.strip()]
    return ds
