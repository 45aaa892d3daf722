"""Each file format read into sections by its structure, with its places kept; every kind of bad file refused with
a clear message. The files are made by the libraries that write them (ragline/dev/office_files.py)."""

from __future__ import annotations

import io
import zipfile

import pytest

from ragline.dev import office_files as make
from services.retrieval import formats
from services.retrieval.chunking import ChunkingOptions, chunk_sections
from services.retrieval.formats import ParseError, join_lines, parse, parse_csv

MANUAL = [
    [("h1", "数据库连接池配置手册"), ("p", "连接池的最大连接数应根据数据库上限和服务实例数计算。" * 4),
     ("h2", "空闲连接"), ("p", "空闲连接超过十分钟会被回收，回收前会发送心跳检测。")],
    [("h1", "Redis outages"), ("p", "When the Redis primary fails, Sentinel promotes a replica within thirty seconds. "
                                    "Applications must connect through the Sentinel addresses, never the primary's address.")],
]


def test_a_pdf_comes_out_as_pages_of_paragraphs_under_its_headings_in_readable_chinese_and_english():
    parsed = parse(make.pdf(MANUAL), "pdf", "")
    assert parsed.parts == 2 and parsed.title == "数据库连接池配置手册"
    by_text = {s.text: s for s in parsed.sections}
    # Lines of one paragraph are joined back: Chinese without spaces, English with them.
    chinese = "连接池的最大连接数应根据数据库上限和服务实例数计算。" * 4
    assert by_text[chinese].meta == {"page": "1"} and by_text[chinese].title == "数据库连接池配置手册"
    idle = next(s for s in parsed.sections if s.text.startswith("空闲连接超过"))
    assert idle.title == "数据库连接池配置手册 > 空闲连接" and idle.meta == {"page": "1"}
    redis = next(s for s in parsed.sections if s.text.startswith("When the Redis"))
    assert redis.meta == {"page": "2"} and redis.title == "数据库连接池配置手册 > Redis outages"
    assert "within thirty seconds. Applications must connect" in redis.text


def test_chunks_never_span_two_pages_so_a_citation_names_one():
    parsed = parse(make.pdf([[("p", "第一页的短句。")], [("p", "第二页的短句。")]]), "pdf", "t")
    chunks = chunk_sections(parsed.sections, ChunkingOptions(max_chars=1200, min_chars=200, overlap_chars=0))
    assert [(c.meta["page"], c.text) for c in chunks] == [("1", "第一页的短句。"), ("2", "第二页的短句。")]


def test_word_headings_become_the_heading_path_as_markdown_headings_do_and_tables_keep_their_header():
    blocks = [("h1", "Deployment"), ("p", "Install the chart."), ("h2", "Rollback"), ("p", "Run helm rollback."),
              ("h1", "回滚"), ("p", "回滚需要四十秒。"), ("table", "setting,value;replicas,3")]
    parsed = parse(make.docx(blocks, title="Ops guide"), "docx", "file name")
    assert parsed.title == "Ops guide"
    assert [(s.title, s.text) for s in parsed.sections] == [
        ("Ops guide > Deployment", "Install the chart."),
        ("Ops guide > Deployment > Rollback", "Run helm rollback."),
        ("Ops guide > 回滚", "回滚需要四十秒。\n\nsetting: replicas; value: 3"),
    ]


def test_a_slide_is_a_section_with_its_title_and_number():
    parsed = parse(make.pptx([("Q3 plan", "Hire two SREs"), ("风险", "预算不足")]), "pptx", "deck")
    assert parsed.parts == 2
    assert [(s.title, s.text, s.meta) for s in parsed.sections] == [
        ("deck > Q3 plan", "Hire two SREs", {"slide": "1"}), ("deck > 风险", "预算不足", {"slide": "2"})]


def test_a_sheet_is_rows_with_their_header_and_empty_sheets_are_skipped():
    parsed = parse(make.xlsx({"Sales": [["region", "q1"], ["north", 10], ["south", None]], "Empty": []}), "xlsx", "book")
    assert parsed.parts == 2
    assert [(s.title, s.text, s.meta) for s in parsed.sections] == [
        ("book > Sales", "region: north; q1: 10\nregion: south", {"sheet": "Sales"})]
    assert [s.text for s in parse_csv("名称,负责人\n备份,张三\n", "t")] == ["名称: 备份; 负责人: 张三"]


def test_lines_are_joined_by_language_and_hyphenation_is_mended():
    assert join_lines(["连接池的", "最大连接数", "is 10 con-", "nections", "and more"]) == "连接池的最大连接数 is 10 connections and more"


def _zip_bomb(expanded: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\0" * expanded)
    return out.getvalue()


@pytest.mark.parametrize(("content", "fmt", "message"), [
    (b"", "pdf", "empty file"),
    (b"%PDF-1.4 not really", "pdf", "cannot read this PDF file (corrupt or truncated?)"),
    (make.pdf(MANUAL)[:1500], "pdf", "cannot read this PDF file (corrupt or truncated?)"),
    (make.scanned_pdf(), "pdf", "no text layer: scanned PDF?"),
    (make.pdf(MANUAL, password="secret"), "pdf", "password-protected PDF"),
    (b"just text", "docx", "not a .docx file (not a zip archive)"),
    (make.docx([("h1", "x")])[:300], "docx", "not a .docx file (not a zip archive)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 512, "xlsx", "password-protected or legacy (pre-2007) Office file"),
    (make.docx([]), "docx", "the DOCX file holds no text"),
])
def test_every_bad_file_gets_a_clear_message(content, fmt, message):
    with pytest.raises(ParseError) as exc:
        parse(content, fmt, "")
    assert str(exc.value).startswith(message), exc.value


def test_an_archive_that_expands_enormously_is_refused_before_it_is_read(monkeypatch):
    monkeypatch.setattr(formats, "MAX_EXPANDED_BYTES", 1 << 20)
    bomb = _zip_bomb(8 << 20)
    assert len(bomb) < 20_000
    with pytest.raises(ParseError, match="the archive expands to 8 MiB, over the 1 MiB limit"):
        parse(bomb, "docx", "")
