"""How text is analysed for BM25, the same way at index and at query time. Weaviate's `word` tokenizer only splits
and lower-cases: "pools" never meets "pool", and "the" counts like a term. The English copy is analysed as search
engines do (Lucene's English analyzer, which the published BEIR BM25 figures use): possessives dropped, Lucene's
stop words removed, Porter2 (Snowball English) stems. The Chinese copy is left to Weaviate's gse_ch segmenter."""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer

from ragline.domain.text import cjk_only

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET.
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with".split())
# Letters and digits of any script but the CJK ones (those belong to the Chinese copy).
_TOKEN = re.compile(r"[^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_POSSESSIVE = re.compile(r"['’]s\b", re.IGNORECASE)


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    stemmer = Stemmer.Stemmer("english")
    stemmer.maxCacheSize = 100_000
    return stemmer


def english_terms(text: str) -> list[str]:
    words = [w for w in _TOKEN.findall(_POSSESSIVE.sub("", text).lower()) if w not in STOP_WORDS]
    return _stemmer().stemWords(words)


def english_copy(text: str) -> str:
    """The text as its stemmed terms, space-separated: what the `*_en` properties hold."""
    return " ".join(english_terms(text))


def keyword_query(text: str) -> str:
    """A query for the analysed properties: its English terms, stemmed, then its Chinese characters for gse_ch."""
    return " ".join(part for part in (english_copy(text), cjk_only(text)) if part)
