"""Static checks of contracts and the chat contract (mypy --strict and pyright strict).

Not run by pytest: ``mypy --config-file tests/typing/pyproject.toml tests/typing`` and
``pyright -p tests/typing/pyproject.toml`` check it. Positive cases pin types with ``assert_type``;
each negative case carries the exact code of both checkers, so an error that disappears fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict, assert_type, final

from streamwire.chat import (
    STREAM_END_REASONS,
    Chat,
    ChunkPayload,
    ClearPayload,
    CompressionStart,
    ConversationStep,
    DonePayload,
    DoneSignal,
    ErrorPayload,
    ExtractedAttachment,
    MessageStart,
    Progress,
    ProgressSteps,
    SelectionRequired,
    SourceLink,
    StreamEndReason,
    TitlePayload,
    UsageStats,
    is_stream_end_reason,
    stop_reason_to_end_reason,
)
from streamwire.contract import BoundEvent, Contract, Event, Message, is_event


@final
class Invoice(TypedDict):
    id: str
    cents: int


class Billing(Contract):
    """A user's own contract: a wire name that differs from the attribute, a Literal payload."""

    invoice: Event[Invoice] = Event("billing.invoice")
    status: Event[Literal["open", "paid"]] = Event()


class MyChat(Chat):
    """A contract that extends the chat contract."""

    invoice: Event[Invoice] = Event()


# --- positive ---------------------------------------------------------------------------------


def descriptors() -> None:
    assert_type(Chat.chunk, BoundEvent[Chat, ChunkPayload])
    assert_type(Chat.progress, BoundEvent[Chat, ProgressSteps | DoneSignal | ChunkPayload])
    assert_type(Chat.clear, BoundEvent[Chat, ClearPayload])
    assert_type(Chat.sources, BoundEvent[Chat, list[SourceLink]])
    assert_type(Chat.done, BoundEvent[Chat, DonePayload])
    # an inherited event is bound to the subclass statically
    assert_type(MyChat.chunk, BoundEvent[MyChat, ChunkPayload])
    assert_type(MyChat.invoice, BoundEvent[MyChat, Invoice])
    assert_type(Billing.status, BoundEvent[Billing, Literal["open", "paid"]])
    assert_type(Chat.chunk.name, str)
    assert_type(Chat.events(), Mapping[str, BoundEvent[Any, Any]])
    assert_type(Chat.event_named("chunk"), BoundEvent[Any, Any] | None)


def messages() -> None:
    """Every chat event accepts its TRD payload as a dict literal."""
    assert_type(Chat.chunk({"chunk": "hi"}), Message[Chat, ChunkPayload])
    assert_type(Chat.suggestions(["a", "b"]), Message[Chat, list[str]])
    Chat.reasoning({"chunk": "hmm"})
    Chat.reasoning({"done": True})
    Chat.progress({"steps": [{"id": "1", "label": "Search", "status": "active"}]})
    Chat.progress({"done": True})
    Chat.progress({"chunk": "thinking"})
    Chat.clear({})
    Chat.message_start({"userMessageId": "u", "assistantMessageId": "a",
                        "model": {"id": "m", "displayName": "M", "provider": "p"}})
    Chat.usage({"inputTokens": 1, "outputTokens": 2, "totalTokens": 3})
    Chat.usage({"inputTokens": 1, "outputTokens": 2, "totalTokens": 3, "cacheReadInputTokens": 4})
    Chat.sources([{"url": "https://x", "title": "X"}, {"url": "u", "title": "t", "snippet": "s"}])
    Chat.attachments([{"id": "f", "filename": "a.png", "mimeType": "image/png",
                       "dataUrl": "data:image/png;base64,AA=="}])
    Chat.title({"title": "Hello"})
    Chat.warnings([])
    Chat.compression({"messageCount": 12})
    Chat.compression({"done": True})
    Chat.selection_required({"selectionId": "s", "prompt": "Pick",
                             "options": [{"id": "a", "label": "A"}], "multiple": True})
    Chat.done({"done": True, "messageId": "a", "userMessageId": "u", "reason": "timeout"})
    Chat.error({"error": "boom", "message": "boom"})
    # an annotated variable works too (an unannotated one is dict[str, str]: see negatives)
    payload: ChunkPayload = {"chunk": "x"}
    Chat.chunk(payload)
    Billing.status("paid")
    assert_type(Billing.invoice({"id": "i", "cents": 1}), Message[Billing, Invoice])


def message_fields(m: Message[Chat, ChunkPayload]) -> None:
    assert_type(m.data, ChunkPayload)
    assert_type(m.event, BoundEvent[Chat, ChunkPayload])
    assert_type(m.name, str)
    assert_type(m.encode(), bytes)


def decoding(raw: bytes, text: str) -> None:
    assert_type(Chat.chunk.decode(raw), ChunkPayload)
    assert_type(Chat.suggestions.decode(text), list[str])
    assert_type(Chat.message_start.decode(raw), MessageStart)
    assert_type(Chat.usage.decode(raw), UsageStats)
    assert_type(Chat.attachments.decode(raw), list[ExtractedAttachment])
    assert_type(Chat.selection_required.decode(raw), SelectionRequired)
    assert_type(Chat.title.decode(raw), TitlePayload)
    assert_type(Chat.error.decode(raw), ErrorPayload)
    assert_type(Chat.chunk.encode({"chunk": "x"}), bytes)


def narrowing_by_key(d: Progress, c: CompressionStart | DoneSignal) -> None:
    """``in`` narrows a key-presence union in both checkers (the payloads are @final)."""
    if "steps" in d:
        assert_type(d, ProgressSteps)
        assert_type(d["steps"], list[ConversationStep])
    elif "done" in d:
        assert_type(d, DoneSignal)
    else:
        assert_type(d, ChunkPayload)
    if "messageCount" in c:
        assert_type(c["messageCount"], int)


def narrowing_by_event(m: Message[Chat, Any]) -> None:
    if is_event(m, Chat.sources):
        assert_type(m, Message[Chat, list[SourceLink]])
        assert_type(m.data, list[SourceLink])
    if is_event(m, Chat.done):
        assert_type(m.data["reason"], StreamEndReason)


def end_reasons(value: object, text: str) -> None:
    if is_stream_end_reason(value):
        assert_type(value, StreamEndReason)
    assert_type(STREAM_END_REASONS, frozenset[StreamEndReason])
    assert_type(stop_reason_to_end_reason("end_turn"), Literal["complete"])
    assert_type(stop_reason_to_end_reason("stop_sequence"), Literal["complete"])
    assert_type(stop_reason_to_end_reason("max_tokens"), Literal["context_limit"])
    assert_type(stop_reason_to_end_reason("tool_use"), None)
    assert_type(stop_reason_to_end_reason(text), StreamEndReason | None)


# --- negative: each line must keep its error in both checkers ---------------------------------


def wrong_payloads() -> None:
    # wrong key
    Chat.chunk({"text": "hi"})  # type: ignore[typeddict-unknown-key, typeddict-item]  # pyright: ignore[reportArgumentType]
    # wrong type
    Chat.chunk({"chunk": 1})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    # missing required key
    Chat.chunk({})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    Chat.message_start({"userMessageId": "u", "assistantMessageId": "a"})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    # nested: a SourceLink without its title, a model without displayName
    Chat.sources([{"url": "u"}])  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    Chat.message_start({"userMessageId": "u", "assistantMessageId": "a", "model": {"id": "m", "provider": "p"}})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    # a bare array is not wrapped, and holds the right items
    Chat.suggestions({"suggestions": ["a"]})  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    Chat.warnings([1])  # type: ignore[list-item]  # pyright: ignore[reportArgumentType]
    # key-presence unions: done must be true, one variant at a time, no key at all is none
    Chat.progress({"done": False})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    Chat.progress({"steps": [], "done": True})  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    Chat.progress({})  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    Chat.compression({"messageCount": "12"})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    # the empty object takes no key
    Chat.clear({"x": 1})  # type: ignore[typeddict-unknown-key]  # pyright: ignore[reportArgumentType]
    # a reason outside StreamEndReason
    Chat.done({"done": True, "messageId": "a", "userMessageId": "u", "reason": "finished"})  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    # a Literal payload
    Billing.status("void")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    # an unannotated variable is dict[str, str], not the TypedDict (annotate it)
    x = {"chunk": "x"}
    Chat.chunk(x)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def unknown_events() -> None:
    Chat.chunkk({"chunk": "x"})  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    Billing.chunk({"chunk": "x"})  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]


def wrong_reads(raw: bytes) -> None:
    d = Chat.chunk.decode(raw)
    d["nope"]  # type: ignore[typeddict-item]  # pyright: ignore[reportGeneralTypeIssues]
    n: int = Chat.title.decode(raw)["title"]  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
    del n


def wrong_message_types(m: Message[Chat, ChunkPayload]) -> None:
    # a message is typed by its event: another event's message does not fit
    wrong: Message[Chat, list[str]] = m  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
    # a message of another contract is not a chat message
    other: Message[Chat, Invoice] = Billing.invoice({"id": "i", "cents": 1})  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
    del wrong, other


def end_reason_literals() -> None:
    reason: StreamEndReason = "finished"  # type: ignore[assignment]  # pyright: ignore[reportAssignmentType]
    del reason


def forgotten_annotation() -> None:
    class Bad(Contract):
        foo = Event("foo")  # type: ignore[var-annotated]  # pyright: ignore[reportUnknownVariableType]

    del Bad
