"""A tenant's glossary: groups of words that mean the same thing to its people, across languages and registers
(连接池 / connection pool, 挂了 / 宕机 / down). Retrieval adds a question's synonyms to its keyword (BM25) side, and
the offline generator counts a sentence as covering a concept of the question when it holds any of its synonyms.

The file has one group a line, its terms separated by '/', and '#' starts a comment:

    连接池 / connection pool / pool
    挂了 / 挂掉 / 宕机 / down / outage

A term matches a question as a whole word (Latin) or as a substring (Chinese). Without a glossary every question
word is a concept of its own, which is exactly plain word overlap."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from ragline.domain.text import has_cjk, question_tokens, tokens


@dataclass(frozen=True)
class Concept:
    """One thing a question asks about: a plain content word, or a glossary group in any of its wordings."""

    word: str = ""
    terms: tuple[re.Pattern[str], ...] = ()

    def covered_by(self, text: str, text_tokens: set[str]) -> bool:
        return (bool(self.word) and self.word in text_tokens) or any(p.search(text) for p in self.terms)


def _pattern(term: str) -> re.Pattern[str]:
    if has_cjk(term):
        return re.compile(re.escape(term))
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(term)}(?![A-Za-z0-9_])", re.I)


@dataclass
class Glossary:
    groups: list[tuple[str, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._patterns = [[(term, _pattern(term)) for term in group] for group in self.groups]

    @classmethod
    def parse(cls, text: str, where: str = "glossary") -> Glossary:
        groups = []
        for n, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            terms = tuple(dict.fromkeys(t.strip() for t in line.split("/") if t.strip()))
            if len(terms) < 2:
                raise ValueError(f"{where}:{n}: a group needs at least two terms separated by '/', got {line!r}")
            groups.append(terms)
        return cls(groups)

    @classmethod
    def load(cls, path: str | Path) -> Glossary:
        return cls.parse(Path(path).read_text(encoding="utf-8"), str(path))

    def matches(self, question: str) -> list[tuple[tuple[str, ...], list[str]]]:
        """Each group that the question uses, with the terms of it that occur in the question."""
        out = []
        for group, patterns in zip(self.groups, self._patterns, strict=True):
            found = [term for term, pattern in patterns if pattern.search(question)]
            if found:
                out.append((group, found))
        return out

    def expand(self, question: str) -> str:
        """The question followed by the synonyms it does not already contain: what a keyword search should match."""
        extra = [t for group, found in self.matches(question) for t in group if t not in found]
        return f"{question} {' '.join(dict.fromkeys(extra))}" if extra else question

    def concepts(self, question: str) -> list[Concept]:
        """What a question asks about: each glossary group it uses (any wording of it counts), then each of its
        remaining content words on its own."""
        out: list[Concept] = []
        rest = question
        for patterns in self._patterns:
            if any(p.search(question) for _, p in patterns):
                out.append(Concept(terms=tuple(p for _, p in patterns)))
                for _, p in patterns:
                    rest = p.sub(" ", rest)
        out.extend(Concept(word=t) for t in dict.fromkeys(question_tokens(rest)))
        return out


NO_GLOSSARY = Glossary()


def concept_coverage(concepts: list[Concept], text: str) -> float:
    """Share of the concepts that the text speaks of, in any of their wordings."""
    if not concepts:
        return 0.0
    text_tokens = set(tokens(text))
    return sum(c.covered_by(text, text_tokens) for c in concepts) / len(concepts)


class Glossaries:
    """Each tenant's glossary. A key is a tenant's name or a shell-style pattern ("team-*"); a name wins over a
    pattern, and patterns are tried in the order given."""

    def __init__(self, by_tenant: dict[str, Glossary] | None = None) -> None:
        self.by_tenant = by_tenant or {}

    def for_tenant(self, tenant: str) -> Glossary:
        if tenant in self.by_tenant:
            return self.by_tenant[tenant]
        return next((g for key, g in self.by_tenant.items() if fnmatch.fnmatchcase(tenant, key)), NO_GLOSSARY)


def load_glossaries(paths: dict[str, str]) -> Glossaries:
    """From tenant (or pattern) -> file, as RAGLINE_GLOSSARIES gives it."""
    return Glossaries({tenant: Glossary.load(path) for tenant, path in paths.items()})
