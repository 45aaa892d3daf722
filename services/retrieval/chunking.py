"""Structure-aware chunking: Markdown by headings, text and HTML by paragraphs, code by definitions."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from ragline.domain.documents import format_of


@dataclass(frozen=True)
class ChunkingOptions:
    max_chars: int = 1200
    min_chars: int = 200
    overlap_chars: int = 150


@dataclass
class Section:
    title: str
    text: str
    meta: dict[str, str] = field(default_factory=dict)


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def split_markdown(text: str, doc_title: str) -> list[Section]:
    """One section per heading; the title is the heading path, e.g. 'Guide > Redis > Outages'."""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    in_fence = False

    def flush() -> None:
        body = "\n".join(lines).strip()
        if body:
            crumbs = [doc_title] if doc_title else []
            crumbs += [h for _, h in path if h != doc_title]
            sections.append(Section(" > ".join(crumbs), body))
        lines.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            flush()
            level = len(match.group(1))
            path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, match.group(2).strip())]
        else:
            lines.append(line)
    flush()
    return sections


def split_paragraphs(text: str, doc_title: str) -> list[Section]:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return [Section(doc_title, p) for p in paragraphs]


class _HtmlText(HTMLParser):
    _BLOCKS = {"p", "div", "section", "article", "li", "br", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "table"}
    _SKIP = {"script", "style", "noscript", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.headings: list[str] = []
        self._in_heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self.skipping += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n\n")
        if re.fullmatch(r"h[1-6]", tag):
            self.parts.append("#" * int(tag[1]) + " ")
            self._in_heading = True

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data if not self._in_heading else data.replace("\n", " "))
            self._in_heading = False


def html_to_markdownish(text: str) -> str:
    """Visible text of an HTML page, with its headings kept as Markdown headings."""
    parser = _HtmlText()
    parser.feed(text)
    out = html.unescape("".join(parser.parts))
    out = re.sub(r"[ \t]+", " ", out)
    return re.sub(r"\n\s*\n(\s*\n)+", "\n\n", out).strip()


_PY_DEF = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)")
_C_LIKE_DEF = re.compile(r"^(?:func|function|fn|pub fn|public|private|protected|static|export function)\b.*?(\w+)\s*\(")


def split_code(text: str, doc_title: str) -> list[Section]:
    """Top-level functions and classes become sections; module-level code between them stays together."""
    sections: list[Section] = []
    current: list[str] = []
    name = "module"
    for line in text.splitlines():
        match = _PY_DEF.match(line) or _C_LIKE_DEF.match(line)
        # Decorators and comments directly above a definition belong to it.
        if match:
            lead: list[str] = []
            while current and (current[-1].startswith("@") or current[-1].startswith("#")):
                lead.insert(0, current.pop())
            if "".join(current).strip():
                sections.append(Section(f"{doc_title} > {name}" if doc_title else name, "\n".join(current).rstrip()))
            current = lead
            name = match.group(1)
        current.append(line)
    if "".join(current).strip():
        sections.append(Section(f"{doc_title} > {name}" if doc_title else name, "\n".join(current).rstrip()))
    return sections


def _split_long(text: str, opts: ChunkingOptions) -> list[str]:
    """Cut an over-long section at sentence or line boundaries, with overlap between pieces."""
    if len(text) <= opts.max_chars:
        return [text]
    units = [u for u in re.split(r"(?<=[。！？.!?\n])", text) if u]
    pieces: list[str] = []
    buf = ""
    for unit in units:
        while len(unit) > opts.max_chars:  # a single huge sentence: hard cut
            head, unit = unit[: opts.max_chars], unit[opts.max_chars - opts.overlap_chars :]
            if buf:
                pieces.append(buf)
                buf = ""
            pieces.append(head)
        if len(buf) + len(unit) > opts.max_chars and buf:
            pieces.append(buf)
            buf = buf[-opts.overlap_chars :] if opts.overlap_chars else ""
        buf += unit
    if buf.strip():
        pieces.append(buf)
    return [p.strip() for p in pieces if p.strip()]


def _merge_short(sections: list[Section], opts: ChunkingOptions) -> list[Section]:
    """Very short sections join their next neighbour (or the previous one at the end) in the same place (page,
    slide, sheet); none are dropped."""
    merged: list[Section] = []
    carry: Section | None = None
    for sec in sections:
        if carry is not None and carry.meta != sec.meta:
            # Never across a page, slide or sheet: a citation names one place.
            merged.append(carry)
            carry = None
        if carry is not None:
            sec = Section(carry.title, f"{carry.text}\n\n{sec.title.split(' > ')[-1]}\n\n{sec.text}"
                          if sec.title != carry.title else f"{carry.text}\n\n{sec.text}", carry.meta)
            carry = None
        if len(sec.text) < opts.min_chars:
            carry = sec
            continue
        merged.append(sec)
    if carry is not None:
        if merged and merged[-1].meta == carry.meta and len(merged[-1].text) + len(carry.text) <= opts.max_chars * 1.5:
            last = merged[-1]
            merged[-1] = Section(last.title, f"{last.text}\n\n{carry.text}", last.meta)
        else:
            merged.append(carry)
    return merged


def detect_content_type(source: str, text: str) -> str:
    """The format the source's file name says, else what the text looks like."""
    named = format_of(source)
    if named:
        return named
    if re.search(r"<(html|body|p|div)\b", text[:2000], re.I):
        return "html"
    if re.search(r"^#{1,6}\s", text, re.M):
        return "markdown"
    return "text"


def chunk_document(text: str, title: str, content_type: str, opts: ChunkingOptions) -> list[Section]:
    if content_type == "html":
        text, content_type = html_to_markdownish(text), "markdown"
    if content_type == "markdown":
        sections = split_markdown(text, title)
    elif content_type == "code":
        sections = split_code(text, title)
    else:
        sections = split_paragraphs(text, title)
    return chunk_sections(sections, opts)


def chunk_sections(sections: list[Section], opts: ChunkingOptions) -> list[Section]:
    """Sections sized for embedding: short ones merged, long ones cut, each piece keeping its section's place."""
    out: list[Section] = []
    for sec in _merge_short(sections, opts):
        out.extend(Section(sec.title, piece, sec.meta) for piece in _split_long(sec.text, opts))
    return out
