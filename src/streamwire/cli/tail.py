"""``streamwire tail URL``: print the events of any SSE or wire v2 stream as they arrive.

Every event is printed (a wire v2 frame as its kind and fields, any other event as its name, id and
data), in colour when stdout is a terminal, or as one JSON object per line with ``--json``. A drop
(the body ends without a terminal frame, the network fails, or nothing arrives for
``--idle-timeout`` seconds) re-attaches with ``Last-Event-ID`` after a backoff; wire v2 chunks
already printed are not printed again. What happens goes to stderr, in the lines the library client
logs (``streamwire.client``): why a connection ended, where it re-attaches from, in how long,
which attempt of how many. A stream that keeps answering with a recoverable ``fail`` is retried
with a growing delay (up to 30 s) and the message says how often it failed in a row; a re-attach
that answers the same ``fail`` at the same cursor (a stored one) ends the command at once (exit 1),
the failure printed once.

The command ends on a terminal frame (exit 0 for ``end``, 1 for a final ``fail`` or
``truncated``), when a re-attach cap is reached (exit 1; ``--max-attempts``, ``--max-elapsed``), on
an answer that is not an event stream (exit 1), on bad arguments (exit 2), on Ctrl-C (exit 130,
quietly) or when its reader goes away (``| head``: exit 1, quietly). A plain SSE stream has no
terminal frame, so it is followed like a browser's EventSource follows it: until it fails for
good or ``--no-reconnect``. On a long replay a progress line (chunks replayed / head) is kept on
stderr when it is a terminal, and plain lines are written when it is not.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, Final, TextIO

import httpx
import msgspec

from ..client._base import LOGGER, read_head
from ..client._core import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    Backoff,
    RetryPolicy,
    describe,
    is_event_stream,
    request_headers,
    response_error,
)
from ..client._http import bearer_headers
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
from ._options import add_token, http_url, seconds, token, whole_number

__all__ = ["configure", "run"]

_COLOURS: Final = {"chunk": "", "caught-up": "36", "rewound": "33", "end": "32", "fail": "31",
                   "truncated": "31", "event": "35"}
#: A replay shorter than this (seconds) shows no progress; then it is redrawn at most this often.
_PROGRESS_AFTER: Final = 0.25
#: When stderr is not a terminal, a plain progress line at most this often (seconds).
_PROGRESS_PLAIN_EVERY: Final = 2.0
#: Tail's backoff: a person is watching, so the first retry comes soon and none waits over 30 s.
_BACKOFF_INITIAL: Final = 1.0
_BACKOFF_MAX: Final = 30.0
_CAPS: Final = ("--max-attempts", "--max-elapsed", "raise it, or pass 0 for no limit")


class _Out:
    """Prints events (human lines, coloured on a terminal, or JSON lines) and progress."""

    def __init__(self, out: TextIO, err: TextIO, *, as_json: bool, colour: bool) -> None:
        self.out, self.err, self.as_json, self.colour = out, err, as_json, colour
        self.tty = err.isatty()
        self._drawn = False  # a progress line is on the terminal

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
        self.clear()
        self.err.write(f"streamwire tail: {text}\n")
        self.err.flush()

    def progress(self, text: str) -> None:
        if self.tty:
            self.err.write(f"\r\x1b[Kstreamwire tail: {text}")
            self._drawn = True
            self.err.flush()
        else:
            self.say(text)

    def clear(self) -> None:
        if self._drawn:
            self.err.write("\r\x1b[K")
            self._drawn = False


class _SayHandler(logging.Handler):
    """The client's log lines, printed by ``_Out.say`` (so they never tear a progress line)."""

    def __init__(self, out: _Out) -> None:
        super().__init__(logging.INFO)
        self._out = out

    def emit(self, record: logging.LogRecord) -> None:
        self._out.say(record.getMessage())


class _Replay:
    """How far a replay got: drawn once it lasts, on stderr."""

    def __init__(self, out: _Out, head: Callable[[], int | None]) -> None:
        self.out, self.head = out, head
        self.started = time.monotonic()
        self.shown = 0.0  # when progress was last shown (0: never)
        self.chunks = 0

    def chunk(self, sequence: int) -> None:
        self.chunks += 1
        now = time.monotonic()
        every = _PROGRESS_AFTER if self.out.tty else _PROGRESS_PLAIN_EVERY
        if now - self.started < _PROGRESS_AFTER or now - self.shown < every:
            return
        self.shown = now
        head = self.head()
        if head is not None and head >= sequence:
            self.out.progress(f"replaying: {sequence:,} / {head:,} chunks "
                              f"({100 * sequence // max(head, 1)}%)")
        else:
            self.out.progress(f"replaying: chunk {sequence:,}")

    def done(self, head: int) -> None:
        if self.shown:
            self.out.say(f"replayed {self.chunks:,} chunks; live from head {head:,}")


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
        policy = RetryPolicy(max_attempts=args.max_attempts or None,
                             max_elapsed=args.max_elapsed or None,
                             backoff_initial=_BACKOFF_INITIAL, backoff_max=_BACKOFF_MAX)
        self.backoff = Backoff(policy, caps=_CAPS)
        self.connections = 0
        self.replay: _Replay | None = None
        self.client: httpx.Client | None = None
        self._head: int | None = None  # the stream's head from /info, once asked
        self._asked = False

    def run(self, client: httpx.Client) -> int:
        self.client = client
        while True:
            try:
                code = self.connection(client)
            except (StreamwireError, httpx.TransportError) as exc:
                error = exc if isinstance(exc, StreamwireError) else _drop(exc, self.state.cursor)
                if self.args.no_reconnect:
                    self.out.say(f"{describe(error)}; not re-attaching (--no-reconnect)")
                    return 1
                try:
                    delay = self.backoff.next_delay(error, time.monotonic(), self.retry,
                                                    self.state.cursor)
                except StreamwireError as final:
                    self.out.say(describe(final))
                    return 1
                where = f"Last-Event-ID {self.last_id}" if self.last_id else "the start"
                level = logging.INFO if self.backoff.attempt == 1 else logging.WARNING
                LOGGER.log(level, "%s", self.backoff.reattach_message(error, delay, where))
                time.sleep(delay)
                continue
            return code

    def head(self) -> int | None:
        """The stream's head for a progress line: asked once, of ``GET .../info`` beside
        ``.../sse``, when a replay first lasts long enough to show; None if it cannot tell."""
        if not self._asked:
            self._asked = True
            url = httpx.URL(self.args.url)
            if self.client is not None and url.path.endswith("/sse"):
                try:
                    info = self.client.get(url.copy_with(path=url.path[:-3] + "info"),
                                           headers=self.args.headers,
                                           timeout=DEFAULT_CONNECT_TIMEOUT)
                    head = info.json().get("head") if info.status_code == 200 else None
                except (httpx.HTTPError, ValueError, AttributeError):
                    head = None
                self._head = head if type(head) is int else None
        return self._head

    @property
    def last_id(self) -> str:
        """What a re-attach sends as ``Last-Event-ID``."""
        if self.wire or not self.plain_id:
            return str(self.state.cursor) if self.state.cursor else ""
        return self.plain_id

    def connection(self, client: httpx.Client) -> int:
        """One connection: print its events; return an exit code once the stream is over."""
        headers = {**self.args.headers, **request_headers(self.last_id)}
        if self.connections:
            self.state.reattach()
        self.connections += 1
        timeout = httpx.Timeout(DEFAULT_CONNECT_TIMEOUT, read=self.args.idle_timeout)
        with client.stream("GET", self.args.url, headers=headers, timeout=timeout) as response:
            kind = response.headers.get("content-type", "")
            status = response.status_code
            body = b"" if is_event_stream(status, kind) else read_head(response)
            error = response_error(status, kind, response.headers.get("retry-after"), body)
            if error is not None:
                raise error
            if self.connections > 1:
                LOGGER.info("re-attached at cursor %d", self.state.cursor)
            self.replay = _Replay(self.out, self.head)
            decoder = FrameDecoder(retry=self.retry, unknown_ids=True)
            try:
                for data in response.iter_bytes():
                    code = self.frames(decoder.feed(data), decoder)
                    if code is not None:
                        return code
                if self.wire:  # a plain SSE stream drops an unterminated last event (WHATWG)
                    code = self.frames(decoder.flush(), decoder)
                    if code is not None:
                        return code
                    self.state.eof()  # raises StreamDropError: no terminal frame is a drop
            finally:
                self.out.clear()
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
            if exc.recoverable and not exc.retryable:  # the same stored fail again: settle
                self.out.say(f"{describe(exc)}; the re-attach at cursor {self.state.cursor} "
                             "returned the same failure with no new chunk: it is stored, "
                             "not re-attaching again")
                return 1
            self.show(frame)
            if exc.retryable:
                raise
            return 1
        except StreamTruncatedError:
            self.show(frame)
            self.out.say("the cursor is below the retention floor: refetch a snapshot and "
                         "tail again with --cursor <its sequence>")
            return 1
        match frame:
            case ChunkFrame(sequence=seq):
                if not delivered:
                    return None  # already printed before a re-attach
                self.backoff.progress()
                if self.replay is not None:
                    self.replay.chunk(seq)
            case CaughtUpFrame(head=head):
                self.backoff.caught_up()
                if self.replay is not None:
                    self.replay.done(head)
                    self.replay = None
            case EndFrame():
                self.backoff.progress()
            case _:
                pass
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
    if isinstance(exc, httpx.ReadTimeout):
        what = "no byte for --idle-timeout seconds"
    elif isinstance(exc, httpx.ConnectError):
        url = exc.request.url
        what = f"cannot connect to {url.host}:{url.port or url.scheme}: {exc}"
    else:
        what = f"connection lost ({type(exc).__name__}: {exc})"
    drop = StreamDropError(what, cursor=cursor)
    drop.__cause__ = exc
    return drop


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"a header is NAME:VALUE, not {text!r}")
    return name.strip(), value.strip()


def configure(p: argparse.ArgumentParser) -> None:
    """``tail``'s options."""
    p.add_argument("url", type=http_url,
                   help="the stream URL (e.g. http://127.0.0.1:8000/streams/ID/sse)")
    p.add_argument("--json", action="store_true", help="one JSON object per event, per line")
    p.add_argument("--cursor", type=whole_number(0), default=0,
                   help="start after this sequence (default 0)")
    add_token(p, "sent as Authorization: Bearer TOKEN")
    p.add_argument("-H", "--header", type=_header, action="append", default=[],
                   metavar="NAME:VALUE", help="an extra request header (repeatable)")
    p.add_argument("--idle-timeout", type=seconds, default=DEFAULT_IDLE_TIMEOUT,
                   metavar="SECONDS",
                   help=f"seconds without a byte before a drop (default {DEFAULT_IDLE_TIMEOUT:g})")
    p.add_argument("--max-attempts", type=whole_number(0), default=10,
                   help="re-attaches in a row without progress before giving up "
                        "(default 10; 0: never give up)")
    p.add_argument("--max-elapsed", type=seconds, default=0.0, metavar="SECONDS",
                   help="seconds without progress before giving up (default 0: no limit)")
    p.add_argument("--no-reconnect", action="store_true", help="exit on the first drop")


def run(args: argparse.Namespace) -> int:
    """Tail the stream at ``args.url``; the exit status.

    Raises:
        CommandLineError: a token no header can carry.
    """
    bearer = token(args)
    args.headers = {**bearer_headers(bearer or None), **dict(args.header)}
    out = _Out(sys.stdout, sys.stderr, as_json=args.json, colour=sys.stdout.isatty())
    handler = _SayHandler(out)
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
    try:
        with httpx.Client() as client:
            return _Tail(args, out).run(client)
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.propagate = True
        out.clear()
