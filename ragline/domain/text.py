"""Language-aware text helpers shared by the stages: detection, tokens, sentences."""

from __future__ import annotations

import re
from functools import lru_cache

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z0-9_]+(?:[.'-][A-Za-z0-9_]+)*")
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;])|(?<=[.])\s+(?=[A-Z0-9\"'(\[])|\n+")

EN_STOPWORDS = frozenset(
    """a an the of to in on at for by with from and or but is are was were be been being do does did what which who
    whom whose when where why how that this these those it its as into than then there their them they he she his her
    we you your our i me my not no yes if so can could would should will shall may might must has have had about
    over under after before between both also only just more most other some such any each all very one two""".split()
)
ZH_STOPWORDS = frozenset(
    """的 了 是 在 和 与 及 或 吗 呢 吧 啊 么 什么 怎么 如何 哪些 哪个 为什么 多少 是否 有 没有 一个 这个 那个
    请问 请 我 你 他 她 它 我们 你们 这 那 就 都 也 还 被 把 对 为 以 会 能 要 可以 应该 之 其""".split()
)


def cjk_ratio(text: str) -> float:
    chars = [c for c in text if not c.isspace()]
    return sum(1 for c in chars if _CJK.match(c)) / len(chars) if chars else 0.0


def detect_language(text: str) -> str:
    """'zh' when a meaningful share of the text is CJK, else 'en'."""
    return "zh" if cjk_ratio(text) > 0.15 else "en"


_ASCII_WORD = re.compile(r"[A-Za-z0-9_]+")


def cjk_only(text: str) -> str:
    """The text with Latin words and digits blanked out. Weaviate's gse_ch tokenizer splits Latin words
    into single letters, which would match unrelated documents; the word-tokenized copy covers them."""
    return _ASCII_WORD.sub(" ", text) if has_cjk(text) else ""


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


@lru_cache(maxsize=1)
def _jieba():  # type: ignore[no-untyped-def]
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


# How people frame a question, as opposed to what they ask: "could you please tell me", "according to our docs",
# 麻烦告诉我一下, 按照公司的运维手册. Left in, these words outnumber the content words of a short question and no
# passage sentence shares them.
_FRAMING = re.compile(
    r"^\s*(?:hi|hello|hey)\b[\s,!.]*"
    r"|\b(?:could|can|would|will) you(?: please)?(?: kindly)? (?:tell me|let me know|explain|check|look up|find out)\b"
    r"|\bi(?:'d| would) like to know\b|\bi (?:want|need) to know\b|\bdo you know\b|\bkindly\b"
    r"|(?:^|,)\s*please(?:\s+(?:tell me|let me know|explain|show me|give me))?\b"
    r"|\b(?:according to|as per|based on|in) (?:the|our|your) (?:docs|documentation|runbooks?|handbooks?|manuals?|wiki)\b"
    r"|(?:麻烦|劳驾|请)?(?:你)?(?:帮我|帮忙)?(?:告诉我|说一下|查一下|查查|看一下|看看)(?:一下)?"
    r"|请?(?:根据|按照|依据|按)(?:公司|我们)?的?(?:文档|运维手册|手册|资料|知识库)(?:里|中|来看|的说法)?(?:回答|说明)?"
    r"|请问|麻烦",
    re.I,
)


def question_tokens(question: str) -> list[str]:
    """The content words of a question, without its framing."""
    return tokens(_FRAMING.sub(" ", question))


def tokens(text: str, keep_stopwords: bool = False) -> list[str]:
    """Lower-cased content words; Chinese is segmented with jieba."""
    return list(_tokens(text, keep_stopwords))


# The same passages come back query after query, and segmenting Chinese with jieba is most of what the
# reranker, grader and generator spend on them: remember recent results.
@lru_cache(maxsize=8192)
def _tokens(text: str, keep_stopwords: bool) -> tuple[str, ...]:
    out: list[str] = []
    if has_cjk(text):
        for tok in _jieba().lcut(text):
            tok = tok.strip().lower()
            if not tok or not (has_cjk(tok) or _WORD.fullmatch(tok)):
                continue
            if keep_stopwords or (tok not in ZH_STOPWORDS and tok not in EN_STOPWORDS):
                out.append(tok)
        return tuple(out)
    for tok in _WORD.findall(text.lower()):
        if keep_stopwords or tok not in EN_STOPWORDS:
            out.append(tok)
    return tuple(out)


_LINE_WRAP = re.compile(r"(?<=\S)[ \t]*\n[ \t]*(?=\S)")


def _unwrap(match: re.Match[str]) -> str:
    # A wrapped line inside a paragraph is one sentence; Chinese needs no space where it was joined.
    before, after = match.string[match.start() - 1], match.string[match.end()]
    return "" if _CJK.match(before) or _CJK.match(after) else " "


def sentences(text: str) -> list[str]:
    """Sentences of a passage: paragraphs and list items split, wrapped lines joined."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)", text):
        block = _LINE_WRAP.sub(_unwrap, block.strip())
        out.extend(p.strip() for p in _SENTENCE_END.split(block) if p and p.strip())
    return out
