"""The parser processes: a file that hangs a parser, exhausts its memory or kills it costs that worker, which is
replaced; the next file is parsed as usual."""

from __future__ import annotations

import pytest

from ragline.dev import office_files as make
from services.retrieval.formats import ParseError
from services.retrieval.sandbox import ParserPool
from tests.unit.retrieval import parser_targets

PDF = make.pdf([[("p", "A page of text, parsed after the failure.")]])


@pytest.mark.parametrize(("target", "message"), [
    (parser_targets.hang, "parsing took over 2 s"),
    (parser_targets.crash, "parsing took over 2 s"),
    (parser_targets.exhaust_memory, "needs more memory to parse than a parser may use"),
])
async def test_a_misbehaving_parse_fails_alone_and_the_next_file_is_parsed(target, message):
    pool = ParserPool(workers=1, timeout_s=2, memory_bytes=512 << 20, target=target)
    try:
        with pytest.raises(ParseError, match=message):
            await pool.parse(PDF, "pdf", "")
    finally:
        pool.close()
    healthy = ParserPool(workers=1, timeout_s=30, memory_bytes=512 << 20)
    try:
        parsed = await healthy.parse(PDF, "pdf", "")
        assert parsed.sections[0].text == "A page of text, parsed after the failure."
    finally:
        healthy.close()


async def test_the_pool_replaces_its_workers_after_a_timeout():
    pool = ParserPool(workers=1, timeout_s=1, memory_bytes=512 << 20, target=parser_targets.hang)
    try:
        with pytest.raises(ParseError):
            await pool.parse(PDF, "pdf", "")
        pool.target = make_parse()
        assert (await pool.parse(PDF, "pdf", "")).parts == 1
    finally:
        pool.close()


def make_parse():  # type: ignore[no-untyped-def]
    from services.retrieval.formats import parse

    return parse
