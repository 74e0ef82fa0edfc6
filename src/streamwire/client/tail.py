"""``streamwire tail URL``: print the events of any SSE or wire v2 stream as they arrive.

Every event is printed (a wire v2 frame as its kind and fields, any other event as its name, id and
data), in colour when stdout is a terminal, or as one JSON object per line with ``--json``. A drop
(the body ends without a terminal frame, the network fails, or nothing arrives for
``--idle-timeout`` seconds) re-attaches with ``Last-Event-ID`` after a backoff, saying so on stderr;
wire v2 chunks already printed are not printed again. The command ends on a terminal frame
(exit 0 for ``end``, 1 for a final ``fail`` or ``truncated``), when the re-attach caps are reached
(exit 1), or on Ctrl-C (exit 130). A plain SSE stream has no terminal frame, so it is followed like
a browser's EventSource follows it: until it fails for good or ``--no-reconnect``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Final, TextIO

import httpx
import msgspec

from ..errors import StreamDropError, StreamFailedError, StreamTruncatedError, StreamwireError
from ..frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    FailFrame,
    FrameDecoder,
    ResumeState,
    RewoundFrame,
    StreamFrame,
    TruncatedFrame,
    UnknownFrame,
)
from ._core import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    Backoff,
    RetryPolicy,
    request_headers,
    response_error,
)

__all__ = ["main"]

_COLOURS: Final = {"chunk": "", "caught-up": "36", "rewound": "33", "end": "32", "fail": "31",
                   "truncated": "31", "event": "35"}


class _Out:
    """Prints events: human lines (coloured on a terminal) or JSON lines."""

    def __init__(self, out: TextIO, err: TextIO, *, as_json: bool, colour: bool) -> None:
        self.out, self.err, self.as_json, self.colour = out, err, as_json, colour

    def event(self, kind: str, record: dict[str, Any], human: str) -> None:
        if self.as_json:
            line = json.dumps({"kind": kind, **record}, ensure_ascii=False)
        else:
            code = _COLOURS.get(kind, "")
            label = f"\x1b[{code}m{kind}\x1b[0m" if self.colour and code else kind
            line = f"{label} {human}" if human else label
        self.out.write(line + "\n")
        self.out.flush()

    def say(self, text: str) -> None:
        self.err.write(f"streamwire tail: {text}\n")
        self.err.flush()


def _data(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


class _Tail:
    def __init__(self, args: argparse.Namespace, out: _Out) -> None:
        self.args, self.out = args, out
        self.state = ResumeState(args.cursor)
        self.plain_id = ""  # the last id of a plain SSE stream (a wire v2 one resumes by cursor)
        self.retry: int | None = None
        self.wire = False  # a wire v2 frame was seen: the stream ends on its terminal
        self.backoff = Backoff(RetryPolicy(max_attempts=args.max_attempts, max_elapsed=None,
                                           backoff_initial=1.0, backoff_max=30.0))
        self.connections = 0

    def run(self, client: httpx.Client) -> int:
        while True:
            try:
                code = self.connection(client)
            except (StreamwireError, httpx.TransportError) as exc:
                error = exc if isinstance(exc, StreamwireError) else _drop(exc, self.state.cursor)
                if self.args.no_reconnect:
                    self.out.say(f"{_describe(error)}; not re-attaching (--no-reconnect)")
                    return 1
                try:
                    delay = self.backoff.next_delay(error, time.monotonic(), self.retry,
                                                    self.state.cursor)
                except StreamwireError as final:
                    self.out.say(f"{_describe(final)}")
                    return 1
                where = f"Last-Event-ID {self.last_id}" if self.last_id else "the start"
                self.out.say(f"{_describe(error)}; re-attaching from {where} in {delay:.1f}s")
                time.sleep(delay)
                continue
            return code

    @property
    def last_id(self) -> str:
        """What a re-attach sends as ``Last-Event-ID``."""
        if self.wire or not self.plain_id:
            return str(self.state.cursor) if self.state.cursor else ""
        return self.plain_id

    def connection(self, client: httpx.Client) -> int:
        """One connection: print its events; return an exit code once the stream is over."""
        headers = {**dict(self.args.header), **request_headers(self.last_id)}
        if self.connections:
            self.state.reattach()
        self.connections += 1
        timeout = httpx.Timeout(DEFAULT_CONNECT_TIMEOUT, read=self.args.idle_timeout)
        with client.stream("GET", self.args.url, headers=headers, timeout=timeout) as response:
            body = response.read() if response.status_code != 200 else b""
            error = response_error(response.status_code,
                                   response.headers.get("content-type", ""),
                                   response.headers.get("retry-after"), body)
            if error is not None:
                raise error
            if self.connections > 1:
                self.out.say("re-attached")
            decoder = FrameDecoder(retry=self.retry, unknown_ids=True)
            for data in response.iter_bytes():
                code = self.frames(decoder.feed(data), decoder)
                if code is not None:
                    return code
            if self.wire:  # a plain SSE stream drops an unterminated last event (WHATWG)
                code = self.frames(decoder.flush(), decoder)
                if code is not None:
                    return code
                self.state.eof()  # raises StreamDropError: no terminal frame is a drop
        raise StreamDropError("the stream ended; EventSource would reconnect",
                              cursor=self.state.cursor)

    def frames(self, frames: list[StreamFrame | UnknownFrame], decoder: FrameDecoder) -> int | None:
        """Print the frames of one read; an exit code once the stream is over. A malformed frame
        (``decoder.error``) ends the connection after the frames before it."""
        self.retry = decoder.retry
        for frame in frames:
            code = self.frame(frame)
            if code is not None:
                return code
        if decoder.error is not None:
            raise decoder.error
        return None

    def frame(self, frame: StreamFrame | UnknownFrame) -> int | None:
        if type(frame) is UnknownFrame:  # a plain SSE event (or one wire v2 does not know)
            self.backoff.progress()
            if frame.id:
                self.plain_id = frame.id
            self.out.event("event", {"event": frame.event, "id": frame.id or None,
                                     "data": _data(frame.data)},
                           f"{frame.event}{f' id={frame.id}' if frame.id else ''} {frame.data}")
            return None
        self.wire = True
        try:
            delivered = self.state.receive(frame)
        except StreamFailedError as exc:
            self.show(frame)
            if exc.recoverable:
                raise
            return 1
        except StreamTruncatedError:
            self.show(frame)
            self.out.say("the cursor is below the retention floor: refetch a snapshot and "
                         "tail again with --cursor <its sequence>")
            return 1
        if isinstance(frame, ChunkFrame) and not delivered:
            return None  # already printed before a re-attach
        self.backoff.progress()
        self.show(frame)
        return 0 if isinstance(frame, EndFrame) else None

    def show(self, frame: StreamFrame | UnknownFrame) -> None:
        out = self.out
        match frame:
            case ChunkFrame(sequence=seq, chunk=chunk):
                text = bytes(chunk).decode()
                out.event("chunk", {"sequence": seq, "chunk": _data(text)}, f"#{seq} {text}")
            case CaughtUpFrame(head=head):
                out.event("caught-up", {"head": head}, f"head={head}")
            case RewoundFrame() | EndFrame() | FailFrame() | TruncatedFrame():
                kind = {RewoundFrame: "rewound", EndFrame: "end", FailFrame: "fail",
                        TruncatedFrame: "truncated"}[type(frame)]
                fields: dict[str, Any] = msgspec.to_builtins(frame)
                out.event(kind, fields, " ".join(f"{k}={json.dumps(v)}" for k, v in fields.items()))
            case UnknownFrame():
                pass  # printed by frame()


def _drop(exc: httpx.TransportError, cursor: int) -> StreamDropError:
    what = "no byte for --idle-timeout seconds" if isinstance(exc, httpx.ReadTimeout) else str(exc)
    drop = StreamDropError(f"connection lost ({type(exc).__name__}: {what})", cursor=cursor)
    drop.__cause__ = exc
    return drop


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"a header is NAME:VALUE, not {text!r}")
    return name.strip(), value.strip()


def main(argv: list[str]) -> int:
    """Tail the stream at the URL in ``argv``; return the exit code."""
    p = argparse.ArgumentParser(prog="streamwire tail",
                                description="Print the events of an SSE or wire v2 stream, "
                                            "re-attaching on drops.")
    p.add_argument("url", help="the stream URL (e.g. http://127.0.0.1:8000/streams/ID/sse)")
    p.add_argument("--json", action="store_true", help="one JSON object per event, per line")
    p.add_argument("--cursor", type=int, default=0, help="start after this sequence (default 0)")
    p.add_argument("-H", "--header", type=_header, action="append", default=[],
                   metavar="NAME:VALUE", help="an extra request header (repeatable)")
    p.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT,
                   help=f"seconds without a byte before a drop (default {DEFAULT_IDLE_TIMEOUT:g})")
    p.add_argument("--max-attempts", type=int, default=10,
                   help="consecutive failed re-attaches before giving up (default 10)")
    p.add_argument("--no-reconnect", action="store_true", help="exit on the first drop")
    args = p.parse_args(argv)
    if args.cursor < 0 or args.max_attempts < 1:
        p.error("--cursor must be >= 0 and --max-attempts >= 1")
    out = _Out(sys.stdout, sys.stderr, as_json=args.json, colour=sys.stdout.isatty())
    try:
        with httpx.Client() as client:
            return _Tail(args, out).run(client)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
