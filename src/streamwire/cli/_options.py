"""What every subcommand shares: the argument types, the ``--token`` option, the usage error.

Light on purpose (stdlib only): ``streamwire.cli`` imports it before it knows which subcommand
runs, and ``from streamwire.cli import main`` loads no web stack.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Final

__all__ = ["USAGE_ERROR", "CommandLineError", "add_token", "http_url", "seconds", "token",
           "whole_number"]

#: The exit status of a usage error, in every subcommand (argparse's own).
USAGE_ERROR: Final = 2


class CommandLineError(Exception):
    """The arguments cannot work, found after parsing: ``streamwire`` prints ``streamwire CMD:
    error: <message>`` (as argparse does for the errors it finds) and exits 2."""


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: an ``int`` >= ``minimum`` (argparse names the option and exits 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    parse.__name__ = f"whole number >= {minimum}"
    return parse


def seconds(text: str) -> float:
    """An argparse type: a number of seconds, >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be >= 0, not {text}")
    return value


def http_url(text: str) -> str:
    """An argparse type: an ``http://`` or ``https://`` URL (a bare ``host:port/path`` would
    otherwise fail on every retry)."""
    if not text.lower().startswith(("http://", "https://")):
        bare = text.split("://", 1)[-1]
        raise argparse.ArgumentTypeError(f"the URL must start with http:// or https://, not "
                                         f"{text!r} (did you mean http://{bare}?)")
    return text


def add_token(parser: argparse.ArgumentParser, what: str) -> None:
    """``--token TOKEN``, the same in every subcommand; read it with ``token(args)``."""
    parser.add_argument("--token", default=None,
                        help=f"bearer token {what} (default: $STREAMWIRE_TOKEN, if set)")


def token(args: argparse.Namespace) -> str:
    """``--token``, else ``$STREAMWIRE_TOKEN``, else ``""``.

    Raises:
        CommandLineError: the token is not printable ASCII (no HTTP header can carry it).
    """
    value: str = args.token if args.token is not None else os.environ.get("STREAMWIRE_TOKEN", "")
    if value:
        from ..client._http import bearer_headers  # here: `streamwire --help` loads no httpx

        try:
            bearer_headers(value)  # the client's one rule for what a bearer token may hold
        except ValueError:
            raise CommandLineError("the token (--token or $STREAMWIRE_TOKEN) must be printable "
                                   "ASCII with no spaces: a bearer header cannot carry anything "
                                   "else") from None
    return value
