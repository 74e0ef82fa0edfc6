"""Static checks of the real ``StreamWriter[C]`` and ``StreamReader[C]`` with contracts.

Checked by mypy and pyright (see ``pyproject.toml`` here), never run. Each negative line carries the
exact code of both checkers, so an error that disappears fails the run.
"""

from __future__ import annotations

from typing import Literal, TypedDict, assert_type, final

from streamwire.chat import (
    Chat,
    ChunkPayload,
    DonePayload,
    DoneSignal,
    Progress,
    ProgressSteps,
    SourceLink,
    StreamEndReason,
)
from streamwire.contract import Contract, Event
from streamwire.errors import PayloadError
from streamwire.reader import StreamReader
from streamwire.transport import MemoryWritable, SSEReadable
from streamwire.writer import StreamWriter


@final
class Invoice(TypedDict):
    id: str
    cents: int


class Billing(Contract):
    invoice: Event[Invoice] = Event("billing.invoice")
    status: Event[Literal["open", "paid"]] = Event()


class MyChat(Chat):
    invoice: Event[Invoice] = Event()


# --- positive ---------------------------------------------------------------------------------


async def writes() -> None:
    w = StreamWriter(MemoryWritable(), Chat)
    assert_type(w, StreamWriter[Chat])
    await w.event(Chat.chunk({"chunk": "hi"}))
    await w.event(Chat.progress({"steps": [{"id": "1", "label": "l", "status": "pending"}]}))
    await w.event(Chat.clear({}))
    await w.event(Chat.suggestions(["a"]))
    await w.end("complete", "a1", "u1")
    await w.error("boom")
    assert_type(w.closed, bool)

    # a writer of an extended contract takes the base contract's events and its own
    mine = StreamWriter(MemoryWritable(), MyChat)
    await mine.event(Chat.chunk({"chunk": "ok"}))
    await mine.event(MyChat.invoice({"id": "i", "cents": 1}))
    await mine.end("timeout", "", "")

    # a user contract
    billing = StreamWriter(MemoryWritable(), Billing)
    await billing.event(Billing.invoice({"id": "i", "cents": 1}))
    await billing.event(Billing.status("open"))


def reads(source: SSEReadable) -> None:
    r = StreamReader(source, Chat)
    assert_type(r, StreamReader[Chat])

    def on_chunk(d: ChunkPayload) -> None:
        print(d["chunk"])

    async def on_done(d: DonePayload) -> None:
        assert_type(d["reason"], StreamEndReason)

    def on_anything(d: object) -> None:
        print(d)

    def on_parse_error(event: str, raw: str, error: PayloadError) -> None:
        print(event, raw, error.event)

    chained = (
        r.on(Chat.chunk, on_chunk)
        .on(Chat.done, on_done)            # a coroutine function
        .on(Chat.title, on_anything)       # a handler of a wider type
        .on(Chat.chunk, lambda d: assert_type(d, ChunkPayload))  # a lambda's argument is inferred
        .on(Chat.sources, lambda links: assert_type(links, list[SourceLink]))
        .on(Chat.suggestions, lambda s: assert_type(s, list[str]))
        .on(Chat.clear, lambda _: None)
        .on_parse_error(on_parse_error)
    )
    assert_type(chained, StreamReader[Chat])

    def on_progress(d: Progress) -> None:
        if "steps" in d:
            assert_type(d, ProgressSteps)
        elif "done" in d:
            assert_type(d, DoneSignal)
        else:
            assert_type(d, ChunkPayload)

    r.on(Chat.progress, on_progress)

    # a reader of an extended contract registers inherited events
    StreamReader(source, MyChat).on(Chat.suggestions, print).on(MyChat.invoice,
                                                                lambda i: print(i["cents"]))


async def consumes(source: SSEReadable) -> None:
    await StreamReader(source, Chat).on(Chat.chunk, print).consume()


# --- negative ---------------------------------------------------------------------------------


async def wrong_writes() -> None:
    w = StreamWriter(MemoryWritable(), Chat)
    # an event of another contract given to a writer of this one
    await w.event(Billing.invoice({"id": "i", "cents": 1}))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    # an event of an extension given to a writer of the base contract
    await w.event(MyChat.invoice({"id": "i", "cents": 1}))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    # wrong payload key, wrong payload type, missing key, through the writer
    await w.event(Chat.chunk({"text": "hi"}))  # type: ignore[typeddict-unknown-key, typeddict-item]  # pyright: ignore[reportArgumentType]
    await w.event(Chat.chunk({"chunk": 1}))  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    await w.event(Chat.title({}))  # type: ignore[typeddict-item]  # pyright: ignore[reportArgumentType]
    # unknown event
    await w.event(Chat.chunkk({"chunk": "x"}))  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]
    # not a message at all (the TypeScript two-argument form)
    await w.event("chunk", {"chunk": "x"})  # type: ignore[call-arg, arg-type]  # pyright: ignore[reportCallIssue]
    # an end reason outside StreamEndReason
    await w.end("finished", "a", "u")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    # the chat terminals exist only on writers of Chat or its extensions
    billing = StreamWriter(MemoryWritable(), Billing)
    await billing.end("complete", "a", "u")  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    await billing.event(Chat.chunk({"chunk": "x"}))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def wrong_handlers(source: SSEReadable) -> None:
    r = StreamReader(source, Chat)

    def wants_list(d: list[str]) -> None:
        print(d)

    async def wants_done(d: DonePayload) -> None:
        print(d)

    def wants_two(event: str, raw: str) -> None:
        print(event, raw)

    # a handler whose parameter type does not match
    r.on(Chat.chunk, wants_list)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    r.on(Chat.chunk, wants_done)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    r.on(Chat.suggestions, wants_two)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    # a lambda's argument is the payload type: a wrong key or a wrong use is caught
    r.on(Chat.chunk, lambda d: d["nope"])  # type: ignore[typeddict-item]  # pyright: ignore[reportGeneralTypeIssues, reportUnknownLambdaType]
    r.on(Chat.done, lambda d: d["reason"] + 1)  # type: ignore[operator]  # pyright: ignore[reportOperatorIssue, reportUnknownLambdaType]
    r.on(Chat.suggestions, lambda s: s["x"])  # type: ignore[call-overload]  # pyright: ignore[reportArgumentType, reportCallIssue, reportUnknownLambdaType]
    # unknown event
    r.on(Chat.chunkk, print)  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]
    # a parse-error handler with the wrong signature
    r.on_parse_error(wants_list)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
