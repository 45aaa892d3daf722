"""Real PDF, Word, PowerPoint and Excel files made by the libraries that write them, for the tests and the demo
corpus: pages, headings, slides and sheets whose contents the tests know."""

from __future__ import annotations

import io

from docx import Document as WordDocument
from openpyxl import Workbook
from pptx import Presentation
from reportlab import rl_config
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer

# The same input gives the same bytes (no creation time or random document id in the file).
rl_config.invariant = 1
# Adobe's Chinese CID font, which every PDF reader has: no font file is needed to write readable Chinese.
pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))


def pdf(pages: list[list[tuple[str, str]]], title: str = "", password: str = "") -> bytes:
    """A PDF with a text layer: per page, (kind, text) blocks, kind "h1", "h2" or "p"; encrypted with a password."""
    sizes = {"h1": 18, "h2": 14, "p": 10.5}
    styles = {kind: ParagraphStyle(kind, fontName="STSong-Light", fontSize=size, leading=size * 1.5, wordWrap="CJK")
              for kind, size in sizes.items()}
    story: list = []
    for n, blocks in enumerate(pages):
        if n:
            story.append(PageBreak())
        for kind, text in blocks:
            story += [Paragraph(text, styles[kind]), Spacer(1, 6)]
    out = io.BytesIO()
    SimpleDocTemplate(out, pagesize=A4, title=title, encrypt=password or None).build(story)
    return out.getvalue()


def scanned_pdf() -> bytes:
    """A PDF page without a text layer (what a scanner makes: only drawing)."""
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    page = canvas.Canvas(out, pagesize=A4)
    page.rect(100, 500, 300, 200, fill=1)
    page.showPage()
    page.save()
    return out.getvalue()


def docx(blocks: list[tuple[str, str]], title: str = "") -> bytes:
    """A Word file: ("h1"/"h2"/"h3", text) are heading styles, ("p", text) body paragraphs, ("table", "a,b;c,d") a table."""
    document = WordDocument()
    if title:
        document.core_properties.title = title
    for kind, text in blocks:
        if kind == "table":
            rows = [r.split(",") for r in text.split(";")]
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            for i, row in enumerate(rows):
                for j, value in enumerate(row):
                    table.cell(i, j).text = value
        elif kind.startswith("h"):
            document.add_heading(text, level=int(kind[1]))
        else:
            document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx(slides: list[tuple[str, str]]) -> bytes:
    """A deck of (title, body) slides."""
    deck = Presentation()
    for heading, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = heading
        slide.placeholders[1].text = body
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx(sheets: dict[str, list[list[object]]]) -> bytes:
    """A workbook of named sheets, each a list of rows, the first row its header."""
    book = Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()
