from services.retrieval.chunking import (
    ChunkingOptions,
    chunk_document,
    detect_content_type,
    html_to_markdownish,
    split_code,
    split_markdown,
)

OPTS = ChunkingOptions(max_chars=300, min_chars=40, overlap_chars=30)


def test_markdown_splits_at_headings_and_keeps_the_heading_path():
    text = (
        "# Guide\nintro text that is long enough to stand alone here.\n## Redis\n### Outages\n"
        "Redis went down and clients timed out waiting.\n## Pools\nPools lend connections to requests so they are reused."
    )
    sections = split_markdown(text, "Ops")
    titles = [s.title for s in sections]
    assert titles == ["Ops > Guide", "Ops > Guide > Redis > Outages", "Ops > Guide > Pools"]
    assert "timed out" in sections[1].text


def test_headings_inside_code_fences_are_not_headings():
    text = "# A\n```\n# not a heading\n```\nbody"
    sections = split_markdown(text, "")
    assert len(sections) == 1 and "# not a heading" in sections[0].text


def test_short_sections_are_merged_not_dropped():
    text = "# T\n## a\nshort.\n## b\n" + "long enough body sentence. " * 5
    chunks = chunk_document(text, "Doc", "markdown", OPTS)
    joined = " ".join(c.text for c in chunks)
    assert "short." in joined
    assert len(chunks) == 1


def test_long_sections_are_split_with_overlap():
    text = " ".join(f"Sentence number {i} talks about connection pools." for i in range(40))
    chunks = chunk_document(text, "Doc", "text", OPTS)
    assert len(chunks) > 3
    assert all(len(c.text) <= OPTS.max_chars for c in chunks)
    # consecutive pieces share text (the overlap)
    assert chunks[0].text[-20:] in chunks[1].text


def test_plain_text_splits_at_paragraphs():
    para = "This paragraph is long enough to be a chunk of its own, really. "
    chunks = chunk_document(f"{para * 3}\n\n{para * 3}", "Doc", "text", OPTS)
    assert len(chunks) == 2


def test_html_keeps_visible_text_and_headings():
    html = "<html><head><script>var x=1;</script></head><body><h1>Title</h1><p>First &amp; para.</p><h2>Sub</h2><p>Second para.</p></body></html>"
    md = html_to_markdownish(html)
    assert "var x" not in md
    assert "# Title" in md and "## Sub" in md and "First & para." in md


def test_code_splits_at_functions_and_classes_with_decorators():
    code = "import os\n\n@decorator\ndef a():\n    return 1\n\nclass B:\n    def m(self):\n        pass\n\nasync def c():\n    pass\n"
    sections = split_code(code, "mod.py")
    titles = [s.title for s in sections]
    assert titles == ["mod.py > module", "mod.py > a", "mod.py > B", "mod.py > c"]
    assert sections[1].text.startswith("@decorator")


def test_content_type_detection():
    assert detect_content_type("a/b.md", "") == "markdown"
    assert detect_content_type("x.py", "") == "code"
    assert detect_content_type("", "<html><p>x</p></html>") == "html"
    assert detect_content_type("", "plain words") == "text"
