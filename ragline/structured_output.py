"""Structured answers from any OpenAI-compatible server. Servers differ in what they accept: OpenAI takes a strict
`json_schema`; llama.cpp's server, vLLM's older releases and several hosted APIs answer `json_schema` with an error
and take `json_object` (llama.cpp then also enforces a `schema` given with it); some take neither. So a request
steps down a ladder, json_schema -> json_object (with the schema, and the schema in the prompt) -> prompt alone
(the JSON taken out of the text), and the step a server refused is remembered for that server. Whatever the server
promised, every answer is validated against its schema (jsonschema)."""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema

Mode = Literal["json_schema", "json_object", "prompt"]
LADDER: tuple[Mode, ...] = ("json_schema", "json_object", "prompt")
# RAGLINE_LLM_STRUCTURED_OUTPUT: "auto" climbs down the ladder as servers refuse; a mode pins that one.
Setting = Literal["auto", "json_schema", "json_object", "prompt"]


class InvalidAnswer(ValueError):
    """The model's answer is not JSON, or not JSON that follows the schema."""


def request_options(mode: Mode, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The chat request's extra arguments for a mode."""
    if mode == "json_schema":
        return {"response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}}
    if mode == "json_object":
        return {"response_format": {"type": "json_object", "schema": schema}}
    return {}


def instructions(mode: Mode, name: str, schema: dict[str, Any]) -> str:
    """What the system prompt adds when the server does not enforce the schema itself."""
    if mode == "json_schema":
        return ""
    return (f"\n\nAnswer with one JSON object ({name}) and nothing else. It must follow this JSON Schema:\n"
            f"{json.dumps(schema, ensure_ascii=False)}")


def is_refusal(status: int | None, message: str) -> bool:
    """Whether an error is the server refusing the response format (rather than failing): learned once per server."""
    text = message.lower()
    return status in (400, 404, 415, 422, 500, 501) and any(w in text for w in ("response_format", "json_schema", "json_object"))


def first_json_object(text: str) -> Any:
    """The first JSON object in a text: the whole text, or one inside prose or a ```json fence."""
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise InvalidAnswer(f"no JSON object in the answer: {text[:200]!r}")


def parse(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The answer's JSON object, validated against the schema; InvalidAnswer says what is wrong."""
    value = first_json_object(text or "")
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the answer"
        raise InvalidAnswer(f"{where}: {exc.message}") from exc
    return value
