"""``streamwire run``: start a run on a streamwire server and print its reply live.

``streamwire run URL AGENT [--input JSON] [--run-id ID]`` starts ``AGENT`` (exactly once, with a
run id chosen here), prints the text of the ``Chat`` events as it arrives (reasoning and progress
as dim notes on a terminal), re-attaches after a drop, and ends with one line giving the outcome.
``streamwire run URL --status RUN_ID`` prints a run's status as JSON; ``--follow RUN_ID`` follows a
run started elsewhere; ``--stop RUN_ID`` stops one. Writes send ``Authorization: Bearer`` with
``--token`` (default ``$STREAMWIRE_TOKEN``). Exit status: 0 completed, 3 stopped (paused or
interrupted), 1 failed or not settled, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TextIO

import httpx

from .chat import Chat
from .cli import plain_help
from .client import Dispatcher, Run
from .contract import Message, is_event
from .errors import StreamwireError
from .frames import ChunkCodec, RemoteOutcomeKind

__all__ = ["main"]

_EXIT: dict[RemoteOutcomeKind, int] = {RemoteOutcomeKind.COMPLETED: 0,
                                        RemoteOutcomeKind.STOPPED: 3}


def _show(msg: Message[Chat, Any] | None, out: TextIO, err: TextIO) -> None:
    if msg is None:
        return
    if is_event(msg, Chat.chunk):
        out.write(msg.data["chunk"])
        out.flush()
    elif is_event(msg, Chat.reasoning):
        text = msg.data["chunk"] if "chunk" in msg.data else "\n"  # noqa: SIM401 - narrows the union
        err.write(f"\x1b[2m{text}\x1b[0m" if err.isatty() else text)
        err.flush()


def _follow(run: Run[Message[Chat, Any] | None], out: TextIO, err: TextIO) -> int:
    for msg in run:
        _show(msg, out, err)
    outcome = run.outcome
    assert outcome is not None
    out.write(f"\n[run {run.run_id}: {outcome.describe()}]\n")
    return _EXIT.get(outcome.kind, 1)


def main(argv: list[str]) -> int:
    """Run the command; the exit status."""
    parser = argparse.ArgumentParser(prog="streamwire run", description=plain_help(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:8000")
    parser.add_argument("agent", nargs="?", help="the agent to start")
    parser.add_argument("--input", default="{}", help="the run's input as JSON (default {})")
    parser.add_argument("--run-id", default=None, help="the run id (default: a random one)")
    parser.add_argument("--status", metavar="RUN_ID", help="print a run's status and exit")
    parser.add_argument("--follow", metavar="RUN_ID", help="follow a run started elsewhere")
    parser.add_argument("--stop", metavar="RUN_ID", help="stop a run and print its status")
    parser.add_argument("--token", default=os.environ.get("STREAMWIRE_TOKEN"),
                        help="bearer token (default $STREAMWIRE_TOKEN)")
    args = parser.parse_args(argv)
    try:
        run_input = json.loads(args.input)
    except json.JSONDecodeError as exc:
        parser.error(f"--input is not JSON: {exc}")
    if not (args.agent or args.status or args.follow or args.stop):
        parser.error("give an AGENT to start, or --status / --follow / --stop RUN_ID")
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
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
            run = dispatcher.start(args.agent, run_input, run_id=args.run_id)
            err.write(f"[run {run.run_id} started]\n")
            return _follow(run, out, err)
        except (StreamwireError, httpx.HTTPError) as exc:
            err.write(f"streamwire run: {type(exc).__name__}: {exc}\n")
            return 1
        except KeyboardInterrupt:
            return 130


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
