"""The public gRPC API fuzzed with hypothesis over its own request messages (every field of every RaglineService
request, drawn from its protobuf descriptor: any text, any enum number including unknown ones, any bytes, nested and
repeated fields) against the live gateway: every call ends with OK or a status a client can act on — never INTERNAL,
UNKNOWN or a dropped connection — and the gateway still answers afterwards."""

from __future__ import annotations

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragline.v1 import common_pb2, ragline_pb2, ragline_pb2_grpc
from tests.integration.conftest import GATEWAY_GRPC

FORBIDDEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS}
TEXT = st.text(max_size=80) | st.sampled_from(["", " ", "HikariCP maximumPoolSize", "连接池", "../../etc/passwd", "a" * 3000])
SCALARS = {
    FieldDescriptor.TYPE_STRING: TEXT,
    FieldDescriptor.TYPE_BYTES: st.binary(max_size=300) | st.sampled_from([b"%PDF-1.4", b"PK\x03\x04"]),
    FieldDescriptor.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_DOUBLE: st.floats(allow_nan=True, allow_infinity=True),
    FieldDescriptor.TYPE_ENUM: st.integers(-5, 20),
}


def messages(cls: type[Message], depth: int = 0) -> st.SearchStrategy[Message]:
    """Any message of this type, field by field from its descriptor."""
    fields = {}
    for field in cls.DESCRIPTOR.fields:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                value = st.dictionaries(TEXT, TEXT, max_size=3)
            elif depth >= 2:
                continue
            else:
                value = messages(_message_class(field), depth + 1)
        else:
            value = SCALARS[field.type]
        fields[field.name] = st.lists(value, max_size=3) if _repeated(field) and not _is_map(field) else value
    return st.fixed_dictionaries({}, optional=fields).map(lambda kw: _build(cls, kw))


def _repeated(field: FieldDescriptor) -> bool:
    return field.is_repeated


def _is_map(field: FieldDescriptor) -> bool:
    return field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def _message_class(field: FieldDescriptor) -> type[Message]:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(field.message_type)


def _build(cls: type[Message], values: dict) -> Message:
    message = cls()
    for name, value in values.items():
        field = cls.DESCRIPTOR.fields_by_name[name]
        if _is_map(field):
            getattr(message, name).update(value)
        elif _repeated(field):
            target = getattr(message, name)
            for item in value:
                target.add().CopyFrom(item) if field.type == FieldDescriptor.TYPE_MESSAGE else target.append(item)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            getattr(message, name).CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


REQUESTS = [("Answer", ragline_pb2.AnswerRequest), ("AnswerStream", ragline_pb2.AnswerStreamRequest),
            ("IngestDocuments", ragline_pb2.IngestDocumentsRequest), ("ListDocuments", ragline_pb2.ListDocumentsRequest),
            ("GetDocument", ragline_pb2.GetDocumentRequest), ("DeleteDocument", ragline_pb2.DeleteDocumentRequest)]


def test_random_requests_to_every_rpc_end_in_ok_or_a_status_a_client_can_act_on(api_keys):
    meta = [("authorization", f"Bearer {api_keys['tests_fuzz']}")]
    seen: dict[str, set[grpc.StatusCode]] = {}
    with grpc.insecure_channel(GATEWAY_GRPC) as channel:
        stub = ragline_pb2_grpc.RaglineServiceStub(channel)

        # Within the gateway's rate limit for one key (burst 100, 50/s), so that the calls reach the stages.
        @settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
        @given(st.sampled_from(REQUESTS).flatmap(lambda r: st.tuples(st.just(r[0]), messages(r[1]))))
        def call(case: tuple[str, Message]) -> None:
            method, request = case
            try:
                result = getattr(stub, method)(request, metadata=meta, timeout=30)
                if method == "AnswerStream":
                    list(result)
                code = grpc.StatusCode.OK
            except grpc.RpcError as exc:
                code = exc.code()  # type: ignore[attr-defined]
                assert code not in FORBIDDEN, (method, request, exc.details())  # type: ignore[attr-defined]
            seen.setdefault(method, set()).add(code)

        call()
        print({method: sorted(code.name for code in codes) for method, codes in seen.items()})  # pytest -s
        assert set(seen) == {m for m, _ in REQUESTS}, seen  # every RPC was reached
        assert all(grpc.StatusCode.UNAUTHENTICATED not in codes for codes in seen.values()), seen  # past the key
        assert grpc.StatusCode.OK in seen["Answer"] | seen["AnswerStream"] and grpc.StatusCode.OK in seen["ListDocuments"], seen
        # Still serving after all of it.
        healthy = stub.Answer(ragline_pb2.AnswerRequest(query="What is the default maximumPoolSize of HikariCP?",
                                                        strategy=common_pb2.STRATEGY_STANDARD), metadata=meta, timeout=30)
        assert healthy.answer.text
