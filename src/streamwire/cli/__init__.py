"""The ``streamwire`` command: one parser, one subcommand per module.

``streamwire serve`` serves stream logs (and agents) over HTTP, ``tail`` prints a stream's events,
``run`` starts a run and prints its reply, ``demo`` shows a reply cut and resumed. Every
subcommand is a module here with ``configure(parser)`` (its options; its docstring is its
``--help``) and ``run(args) -> int`` (the exit status), imported only when it runs: the
subcommands have their own dependencies, and ``from streamwire.cli import main`` loads no web
stack.

Exit status, in every subcommand: 0 done, 1 failed, 2 usage error (one line on stderr,
``streamwire CMD: error: ...``, no traceback), 130 Ctrl-C (quietly, wherever it lands). A reader
that goes away (``| head``) ends the command quietly with 1, as the Python documentation
recommends for SIGPIPE.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Final, cast

from ._options import USAGE_ERROR, CommandLineError
from .serve import app_from_env, open_log

__all__ = ["app_from_env", "main", "open_log"]

#: Each subcommand: its module (imported when it runs) and its line in ``streamwire --help``.
COMMANDS: Final = {
    "serve": ("streamwire.cli.serve", "serve stream logs over HTTP (wire v2)"),
    "demo": ("streamwire.cli.demo", "stream a simulated reply, cut it midway and resume it"),
    "tail": ("streamwire.cli.tail", "print the events of an SSE or wire v2 stream"),
    "run": ("streamwire.cli.run", "start a run and print its reply live, or --status RUN_ID"),
    "token": ("streamwire.cli.token", "mint a JWT for a user of serve --jwt-secret"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``streamwire`` console script; returns the exit status."""
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 1


def plain_help(text: str | None) -> str:
    """Help text without the source markup of docstrings (every subcommand's ``--help``)."""
    return (text or "").replace("``", "")


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="streamwire",
                                     description="Typed, resumable Server-Sent Events.")
    parser.add_argument("--version", action="version",
                        version=f"streamwire {importlib.import_module('streamwire').__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    parsers = {name: sub.add_parser(name, help=line, description=line)
               for name, (_, line) in COMMANDS.items()}
    # Only the subcommand named is imported and given its options (the only options before it
    # are --help and --version, so the first word that is not an option names it).
    name = next((word for word in argv if not word.startswith("-")), None)
    if name is None or name not in COMMANDS:
        parser.parse_args(argv)  # exits on --help, --version, an unknown option or subcommand
        parser.print_help(sys.stderr)  # no subcommand
        return USAGE_ERROR
    command = _configure(parsers[name], importlib.import_module(COMMANDS[name][0]))
    args = parser.parse_args(argv)
    try:
        return command(args)
    except CommandLineError as exc:
        print(f"streamwire {name}: error: {exc}", file=sys.stderr)  # as argparse's errors
        return USAGE_ERROR


def _configure(parser: argparse.ArgumentParser,
               module: ModuleType) -> Callable[[argparse.Namespace], int]:
    """Give ``parser`` the options of the subcommand ``module`` and its docstring as help."""
    parser.description = plain_help(module.__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    module.configure(parser)
    return cast(Callable[[argparse.Namespace], int], module.run)


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at devnull: the flush at exit must not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (stdout replaced in-process)
        pass
