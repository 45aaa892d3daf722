"""Files that are not text, read into sections that keep where they came from: PDF by pages and paragraphs
(pdfminer.six's layout analysis rebuilds them from lines), Word by its heading styles, PowerPoint by slides, Excel
and CSV as rows with their header. Runs in retrieval's parser processes (services/retrieval/sandbox.py), never in
the serving process: a hostile file can cost a worker, not the service."""

from __future__ import annotations

import csv
import io
import re
import statistics
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field

from services.retrieval.chunking import Section, split_markdown

# What an Office file (a zip) may expand to, before any parser reads it.
MAX_EXPANDED_BYTES = 256 * 1024 * 1024
MAX_TABLE_CELLS = 200_000
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # encrypted OOXML and legacy .doc/.ppt/.xls
_CJK_END = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]$")
_CJK_START = re.compile(r"^[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


class ParseError(ValueError):
    """A file that cannot be read; the message is the document's error."""


@dataclass
class Parsed:
    title: str
    sections: list[Section]
    # Pages, slides or sheets.
    parts: int = 0
    meta: dict[str, str] = field(default_factory=dict)


def parse(content: bytes, fmt: str, title: str) -> Parsed:
    if not content:
        raise ParseError("empty file")
    reader = {"pdf": parse_pdf, "docx": parse_docx, "pptx": parse_pptx, "xlsx": parse_xlsx}.get(fmt)
    if reader is None:
        raise ParseError(f"no parser for format {fmt!r}")
    if fmt != "pdf":
        _check_archive(content, fmt)
    try:
        parsed = reader(content, title)
    except ParseError:
        raise
    except MemoryError:
        raise ParseError(f"the {fmt.upper()} file needs more memory to parse than a parser may use") from None
    except Exception as exc:  # a corrupt file raises whatever its parser meets first
        raise ParseError(f"cannot read this {fmt.upper()} file (corrupt or truncated?): {type(exc).__name__}: {exc}"[:500]) from None
    if not any(s.text.strip() for s in parsed.sections):
        raise ParseError("no text layer: scanned PDF?" if fmt == "pdf" else f"the {fmt.upper()} file holds no text")
    return parsed


def _check_archive(content: bytes, fmt: str) -> None:
    if content.startswith(_OLE_MAGIC):
        raise ParseError(f"password-protected or legacy (pre-2007) Office file: save it as an unprotected .{fmt}")
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            expanded = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile:
        raise ParseError(f"not a .{fmt} file (not a zip archive): corrupt or truncated?") from None
    if expanded > MAX_EXPANDED_BYTES:
        raise ParseError(f"the archive expands to {expanded // 2**20} MiB, over the {MAX_EXPANDED_BYTES // 2**20} MiB limit")


def join_lines(lines: list[str]) -> str:
    """Lines of one paragraph as one text: Chinese lines join without a space, a hyphenated English word is mended."""
    out = ""
    for line in (ln.strip() for ln in lines):
        if not line:
            continue
        if not out:
            out = line
        elif out.endswith("-") and line[:1].islower():
            out = out[:-1] + line
        elif _CJK_END.search(out) and _CJK_START.search(line):
            out += line
        else:
            out += " " + line
    return out


@dataclass
class _Line:
    page: int
    size: float
    text: str
    top: float
    bottom: float
    width: float


def _pdf_lines(content: bytes) -> tuple[list[list[_Line]], int]:
    """The text lines of each column block, in reading order (pdfminer.six's layout analysis), and the page count."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams, LTChar, LTTextContainer, LTTextLine
    from pdfminer.pdfdocument import PDFPasswordIncorrect

    blocks: list[list[_Line]] = []
    pages = 0
    try:
        # A generous line margin groups a column's lines into one block; paragraphs are found within it below.
        for pages, layout in enumerate(extract_pages(io.BytesIO(content), laparams=LAParams(line_margin=1.5)), 1):
            for box in layout:
                if isinstance(box, LTTextContainer):
                    block = []
                    for line in box:
                        if isinstance(line, LTTextLine) and line.get_text().strip():
                            sizes = [ch.size for ch in line if isinstance(ch, LTChar)]
                            block.append(_Line(pages, statistics.median(sizes) if sizes else 0.0, line.get_text().strip(),
                                               line.y1, line.y0, line.width))
                    if block:
                        blocks.append(block)
    except PDFPasswordIncorrect:
        raise ParseError("password-protected PDF: remove the password and ingest it again") from None
    return blocks, pages


def _paragraphs(blocks: list[list[_Line]]) -> list[list[_Line]]:
    """Lines regrouped into paragraphs: a paragraph ends where the gap to the next line is wider than the
    document's usual line gap, or where a line stops well short of the block's width after a sentence's end."""
    gaps = [a.bottom - b.top for block in blocks for a, b in zip(block, block[1:], strict=False) if 0 <= a.bottom - b.top < 3 * a.size]
    usual = statistics.median(gaps) if gaps else 0.0
    out: list[list[_Line]] = []
    for block in blocks:
        full = max(line.width for line in block)
        para = [block[0]]
        for prev, line in zip(block, block[1:], strict=False):
            gap = prev.bottom - line.top
            ends = prev.width < 0.8 * full and prev.text[-1:] in ".!?:。！？：；;"
            if gap > usual * 1.4 + 0.1 * prev.size or ends or abs(line.size - prev.size) > 0.15 * prev.size:
                out.append(para)
                para = []
            para.append(line)
        out.append(para)
    return out


def parse_pdf(content: bytes, title: str) -> Parsed:
    blocks, pages = _pdf_lines(content)
    paragraphs = _paragraphs(blocks)
    body = statistics.median([ln.size for p in paragraphs for ln in p] or [0.0])
    # A short paragraph in a clearly larger font is a heading; its size ranks its level.
    heading_sizes = sorted({round(p[0].size) for p in paragraphs if _is_heading(p, body)}, reverse=True)
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    doc_title = title
    for para in paragraphs:
        text = join_lines([ln.text for ln in para])
        if _is_heading(para, body):
            level = heading_sizes.index(round(para[0].size)) + 1
            if not doc_title and not sections:
                doc_title = text
            path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, text)]
            continue
        crumbs = [doc_title, *(h for _, h in path if h != doc_title)] if doc_title else [h for _, h in path]
        sections.append(Section(" > ".join(crumbs), text, {"page": str(para[0].page)}))
    return Parsed(doc_title, sections, pages)


def _is_heading(para: list[_Line], body: float) -> bool:
    return body > 0 and para[0].size >= body * 1.2 and len(para) <= 2 and sum(len(ln.text) for ln in para) <= 100


_HEADING_STYLE = re.compile(r"^(?:heading|标题)\s*(\d)$", re.I)


def parse_docx(content: bytes, title: str) -> Parsed:
    """Word headings become Markdown headings, so a .docx is chunked exactly as Markdown is."""
    import docx
    from docx.table import Table

    document = docx.Document(io.BytesIO(content))
    title = document.core_properties.title or title
    markdown: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            rows = [[cell.text.strip() for cell in row.cells] for row in block.rows]
            markdown.extend(_table_lines(rows))
            continue
        text = block.text.strip()
        if not text:
            continue
        style = (block.style.name if block.style is not None else "") or ""
        match = _HEADING_STYLE.match(style)
        level = int(match.group(1)) if match else 1 if style.lower() == "title" else 0
        markdown.append(f"{'#' * level} {text}" if level else text)
        markdown.append("")
    return Parsed(title, split_markdown("\n".join(markdown), title))


def parse_pptx(content: bytes, title: str) -> Parsed:
    """A slide is a section, its title the heading; its notes belong to it."""
    from pptx import Presentation

    deck = Presentation(io.BytesIO(content))
    title = deck.core_properties.title or title
    sections = []
    for number, slide in enumerate(deck.slides, 1):
        heading = slide.shapes.title.text.strip() if slide.shapes.title is not None and slide.shapes.title.has_text_frame else ""
        texts = []
        for shape in slide.shapes:
            if shape == slide.shapes.title:
                continue
            if shape.has_text_frame and shape.text_frame.text.strip():
                texts.append(shape.text_frame.text.strip())
            if getattr(shape, "has_table", False) and shape.has_table:
                texts.extend(_table_lines([[c.text.strip() for c in row.cells] for row in shape.table.rows]))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            texts.append(slide.notes_slide.notes_text_frame.text.strip())
        body = "\n".join(t for t in texts if t)
        if body or heading:
            crumbs = [c for c in (title, heading or f"Slide {number}") if c]
            sections.append(Section(" > ".join(crumbs), body or heading, {"slide": str(number)}))
    return Parsed(title, sections, len(deck.slides))


def parse_xlsx(content: bytes, title: str) -> Parsed:
    """A sheet is a section of rows, each row written with its header so that any piece of it reads alone."""
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(content), read_only=True, data_only=True)
    sections = []
    cells = 0
    try:
        for sheet in book.worksheets:
            rows = []
            for row in sheet.iter_rows(values_only=True):
                cells += len(row)
                if cells > MAX_TABLE_CELLS:
                    raise ParseError(f"over {MAX_TABLE_CELLS} cells: split the workbook")
                rows.append(["" if v is None else str(v).strip() for v in row])
            lines = _table_lines(rows)
            if lines:
                sections.append(Section(f"{title} > {sheet.title}" if title else sheet.title, "\n".join(lines),
                                        {"sheet": sheet.title}))
        return Parsed(title, sections, len(book.worksheets))
    finally:
        book.close()


def parse_csv(text: str, title: str) -> list[Section]:
    rows = list(_limited(csv.reader(io.StringIO(text))))
    return [Section(title, "\n".join(_table_lines(rows)))] if rows else []


def _limited(rows: Iterator[list[str]]) -> Iterator[list[str]]:
    cells = 0
    for row in rows:
        cells += len(row)
        if cells > MAX_TABLE_CELLS:
            raise ParseError(f"over {MAX_TABLE_CELLS} cells: split the table")
        yield row


def _table_lines(rows: list[list[str]]) -> list[str]:
    """'header: value; header: value' per row, the first non-empty row being the header."""
    rows = [r for r in rows if any(c for c in r)]
    if not rows:
        return []
    header, *body = rows
    if not body:
        return ["; ".join(c for c in header if c)]
    out = []
    for row in body:
        pairs = [f"{h or f'column {i + 1}'}: {v}" for i, (h, v) in enumerate(zip(header, row, strict=False)) if v]
        if pairs:
            out.append("; ".join(pairs))
    return out
