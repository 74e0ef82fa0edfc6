"""``streamwire run``: start a run on a streamwire server and print its reply live.

``streamwire run URL AGENT [--input JSON] [--run-id ID]`` starts ``AGENT`` (exactly once, with a
run id chosen here), prints the text of the ``Chat`` events as it arrives (reasoning and progress
as dim notes on a terminal), re-attaches after a drop, and ends with one line giving the outcome.
``streamwire run URL --status RUN_ID`` prints a run's status as JSON; ``--follow RUN_ID`` follows a
run started elsewhere; ``--stop RUN_ID`` stops one. Requests send ``Authorization: Bearer`` with
``--token`` (default ``$STREAMWIRE_TOKEN``). Exit status: 0 completed, 3 stopped (paused or
interrupted), 1 failed or not settled, 2 usage error, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

import httpx

from ..chat import Chat
from ..client import Dispatcher, Run
from ..client._http import bearer_headers
from ..contract import Message, is_event
from ..errors import StreamwireError
from ..frames import ChunkCodec, RemoteOutcomeKind
from ._options import CommandLineError, add_token, http_url, token

__all__ = ["configure", "run"]

_EXIT: dict[RemoteOutcomeKind, int] = {RemoteOutcomeKind.COMPLETED: 0,
                                        RemoteOutcomeKind.STOPPED: 3}


def _show(msg: Message[Chat, Any] | None, out: TextIO, err: TextIO) -> None:
    if msg is None:
        return
    if is_event(msg, Chat.chunk):
        out.write(msg.data["chunk"])
        out.flush()
    elif is_event(msg, Chat.reasoning):
        text = msg.data["chunk"] if "chunk" in msg.data else "\n"  # noqa: SIM401 - narrows
        err.write(f"\x1b[2m{text}\x1b[0m" if err.isatty() else text)
        err.flush()


def _follow(run: Run[Message[Chat, Any] | None], out: TextIO, err: TextIO) -> int:
    for msg in run:
        _show(msg, out, err)
    outcome = run.outcome
    assert outcome is not None
    out.write(f"\n[run {run.run_id}: {outcome.describe()}]\n")
    return _EXIT.get(outcome.kind, 1)


def _json(text: str) -> Any:
    """An argparse type: a JSON value."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None


def configure(p: argparse.ArgumentParser) -> None:
    """``run``'s options."""
    p.add_argument("url", type=http_url, help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument("agent", nargs="?", help="the agent to start")
    p.add_argument("--input", type=_json, default="{}", metavar="JSON",
                   help="the run's input as JSON (default {})")
    p.add_argument("--run-id", default=None, help="the run id (default: a random one)")
    p.add_argument("--status", metavar="RUN_ID", help="print a run's status and exit")
    p.add_argument("--follow", metavar="RUN_ID", help="follow a run started elsewhere")
    p.add_argument("--stop", metavar="RUN_ID", help="stop a run and print its status")
    add_token(p, "sent as Authorization: Bearer TOKEN")


def run(args: argparse.Namespace) -> int:
    """Start, follow, stop or ask about a run; the exit status.

    Raises:
        CommandLineError: nothing to do (no agent and no run id), a token no header can carry.
    """
    if not (args.agent or args.status or args.follow or args.stop):
        raise CommandLineError("give an AGENT to start, or --status / --follow / --stop RUN_ID")
    bearer = token(args)
    headers = bearer_headers(bearer or None)
    out, err = sys.stdout, sys.stderr
    with httpx.Client() as client:
        dispatcher = Dispatcher(client, args.url, decode=ChunkCodec(Chat).decode, headers=headers)
        try:
            if args.status or args.stop:
                answer = (dispatcher.status(args.status) if args.status
                          else dispatcher.stop(args.stop))
                out.write(json.dumps(answer, indent=2) + "\n")
                return 0
            if args.follow:
                return _follow(dispatcher.follow(args.follow), out, err)
            started = dispatcher.start(args.agent, args.input, run_id=args.run_id)
            err.write(f"[run {started.run_id} started]\n")
            return _follow(started, out, err)
        except (StreamwireError, httpx.HTTPError) as exc:
            err.write(f"streamwire run: {type(exc).__name__}: {exc}\n")
            return 1
