"""The model client's structured answers, through the real `openai` client against the OpenAI-compatible test
double: a server that refuses json_schema (as llama-cpp-python's does) is asked with json_object from then on, a
pinned prompt mode takes the JSON out of the text, and an invalid answer is asked for once more, then refused."""

from __future__ import annotations

import pytest

from ragline.llm import LlmClient, Usage
from ragline.structured_output import InvalidAnswer
from tests.integration.doubles import PaidApiDouble

SCHEMA = {"type": "object", "properties": {"relevant": {"type": "boolean"}, "reason": {"type": "string"}},
          "required": ["relevant", "reason"], "additionalProperties": False}
QUESTION = "Question: What is the default pool size of HikariCP?\n\nPassage (pools):\nThe default pool size is 10."


@pytest.fixture
def double(monkeypatch):
    with PaidApiDouble(18083) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.base_url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server


async def test_a_server_that_refuses_json_schema_is_asked_with_json_object_from_then_on(double):
    double.refuse_json_schema = True
    client = LlmClient("test-model")
    usage = Usage()
    first = await client.structured("grade_relevance", "Grade it.", QUESTION, SCHEMA, usage)
    second = await client.structured("grade_relevance", "Grade it.", QUESTION, SCHEMA, usage)
    assert first == second == {"relevant": True, "reason": "shared words"}
    formats = [r["format"] for r in double.chats()]
    # The refusal (retried once by the openai client, as for any 500), then json_object only.
    assert formats[0] == "json_schema" and formats[-2:] == ["json_object", "json_object"]
    assert formats.count("json_schema") <= 2 and usage.calls == 2 and usage.prompt_tokens > 0


async def test_a_pinned_prompt_mode_takes_the_json_out_of_the_text(double):
    client = LlmClient("test-model", structured_output="prompt")
    answer = await client.structured("grade_relevance", "Grade it.", QUESTION, SCHEMA, Usage())
    assert answer == {"relevant": True, "reason": "shared words"}
    (chat,) = double.chats()
    assert chat["format"] is None


async def test_an_invalid_answer_is_asked_for_once_more_then_refused(double):
    client = LlmClient("test-model")
    double.invalid_once = {"grade_relevance"}
    usage = Usage()
    assert (await client.structured("grade_relevance", "Grade it.", QUESTION, SCHEMA, usage))["relevant"] is True
    retry = double.chats()[-1]["user"]
    assert usage.calls == 2 and "Your previous answer was not valid (the answer: 'reason' is a required property)" in retry

    async def always_invalid(name: str, system: str, user: str, usage: Usage, timeout_s: float | None, **extra: object) -> str:
        return '{"relevant": "perhaps"}'

    client._chat = always_invalid  # type: ignore[method-assign]
    with pytest.raises(InvalidAnswer, match="required property"):
        await client.structured("grade_relevance", "Grade it.", QUESTION, SCHEMA, Usage())
