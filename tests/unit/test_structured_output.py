"""The structured-output ladder's rules: what each step asks of the server, what counts as a refusal, and how an
answer is taken out of text and validated against its schema."""

import pytest

from ragline.structured_output import InvalidAnswer, instructions, is_refusal, parse, request_options

SCHEMA = {"type": "object", "properties": {"relevant": {"type": "boolean"}, "reason": {"type": "string"}},
          "required": ["relevant", "reason"], "additionalProperties": False}


def test_each_step_asks_for_less_and_says_more_in_the_prompt():
    assert request_options("json_schema", "grade", SCHEMA)["response_format"]["json_schema"]["strict"] is True
    assert request_options("json_object", "grade", SCHEMA) == {"response_format": {"type": "json_object", "schema": SCHEMA}}
    assert request_options("prompt", "grade", SCHEMA) == {}
    assert instructions("json_schema", "grade", SCHEMA) == ""
    assert '"relevant"' in instructions("prompt", "grade", SCHEMA) and "(grade)" in instructions("json_object", "grade", SCHEMA)


def test_a_refusal_is_a_client_or_server_error_about_the_response_format():
    # llama-cpp-python's server, asked for json_schema:
    assert is_refusal(500, "response_format.type: Input should be 'text' or 'json_object'")
    assert is_refusal(400, "Unsupported value: 'json_schema' is not supported with this model.")
    assert not is_refusal(503, "response_format: overloaded")
    assert not is_refusal(500, "CUDA out of memory")


def test_the_json_object_is_found_in_prose_or_a_fence_and_validated():
    assert parse('Sure! ```json\n{"relevant": true, "reason": "names it"}\n```', SCHEMA) == {"relevant": True, "reason": "names it"}
    assert parse('{"relevant": false, "reason": "no"} and more text {"x": 1}', SCHEMA)["relevant"] is False
    with pytest.raises(InvalidAnswer, match="relevant: 'yes' is not of type 'boolean'"):
        parse('{"relevant": "yes", "reason": "r"}', SCHEMA)
    with pytest.raises(InvalidAnswer, match="'reason' is a required property"):
        parse('{"relevant": true}', SCHEMA)
    with pytest.raises(InvalidAnswer, match="no JSON object"):
        parse("I think it is relevant.", SCHEMA)
