"""Settings objects: every option once, with its default, its check and its help (uvicorn's
``Config`` idea). A settings class is a frozen dataclass whose fields are made by ``option``;
``add_arguments`` derives one command-line flag per field from it and ``values_from_args`` reads
them back, so a flag cannot be missing or disagree with the library's default. ``check`` applies
the same checks in code.

``streamwire.server.ServerSettings`` (the stream server) and ``streamwire.runs.RunsSettings`` (the
runs service) are the two. Importing this module loads no web stack.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
from dataclasses import field
from typing import Any, Final, Literal, TypeAlias

__all__ = ["Kind", "add_arguments", "check", "option", "values_from_args"]

#: How an option is read and checked: ``count`` an int >= 1, ``bytes`` the same (shown in MiB),
#: ``seconds`` a finite number > 0 (``seconds0``: >= 0), ``beat`` seconds or None (``0`` on the
#: command line), ``code`` an int >= 0, ``flag`` a bool, ``origins`` strings (repeatable).
Kind: TypeAlias = Literal["count", "bytes", "seconds", "seconds0", "beat", "code", "flag",
                          "origins"]

_INTS: Final = ("count", "bytes", "code")


def option(default: Any, kind: Kind, flag: str, help_text: str, metavar: str | None = None, *,
           none_ok: bool = False, shown: str | None = None) -> Any:
    """A settings field: its default, how it is checked (``kind``; ``none_ok``: None is allowed
    too), its command-line ``flag`` and help (``shown``: the default as the help says it, when
    the value alone would not say what it means)."""
    return field(default=default, metadata={"kind": kind, "flag": flag, "help": help_text,
                                            "metavar": metavar, "none_ok": none_ok,
                                            "shown": shown})


def check(settings: object) -> None:
    """Check every field of a settings object.

    Raises:
        ValueError: names the option and what it must be.
    """
    for spec in dataclasses.fields(settings):  # type: ignore[arg-type]
        value = getattr(settings, spec.name)
        none_ok: bool = spec.metadata["none_ok"]
        problem = _problem(spec.metadata["kind"], value, none_ok=none_ok)
        if problem is not None:
            also = " (or None)" if none_ok else ""
            raise ValueError(f"{spec.name} must be {problem}{also}, not {value!r}")


def _problem(kind: Kind, value: object, *, none_ok: bool = False) -> str | None:
    """What ``value`` must be for an option of ``kind``, or None when it is fine."""
    if kind == "flag":
        return None if isinstance(value, bool) else "True or False"
    if kind == "origins":
        return None  # any sequence of strings (the settings class checks it)
    if value is None:
        return None if kind == "beat" or none_ok else _MUST[kind]
    if kind in _INTS:
        low = 0 if kind == "code" else 1
        return None if type(value) is int and value >= low else _MUST[kind]
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is None or not number < math.inf:
        return _MUST[kind]
    return None if (number >= 0 if kind == "seconds0" else number > 0) else _MUST[kind]


_MUST: Final[dict[str, str]] = {
    "count": "an int >= 1",
    "bytes": "an int >= 1",
    "code": "an int >= 0",
    "seconds": "a finite number of seconds > 0",
    "seconds0": "a finite number of seconds >= 0",
    "beat": "> 0 seconds, or None to turn it off",
}


# ---- the command line -----------------------------------------------------------------------------


def _shown(kind: Kind, value: object) -> str:
    """A default as the help shows it: ``10,000``, ``4 MiB``, ``15``, ``off``."""
    if value is None:
        return "off" if kind == "beat" else "none"
    if kind == "bytes" and isinstance(value, int) and value % 2**20 == 0:
        return f"{value // 2**20} MiB"
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _parser_for(kind: Kind, none_ok: bool) -> Callable[[str], Any]:
    """The argparse ``type`` of an option: converts the text and applies the option's check
    (argparse reports the message with the flag's name and exits 2)."""

    def parse(text: str) -> Any:
        value: int | float | None
        try:
            value = int(text) if kind in _INTS else float(text)
        except ValueError:
            what = "a whole number" if kind in _INTS else "a number"
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None
        if kind == "beat" and value == 0:
            return None  # --heartbeat 0: off
        if _problem(kind, value, none_ok=none_ok) is not None:
            if kind in _INTS:
                least = 1 if kind in ("count", "bytes") else 0
                raise argparse.ArgumentTypeError(f"must be at least {least}, not {value:g}")
            raise argparse.ArgumentTypeError(
                f"must be a finite number of seconds {'> 0' if kind != 'seconds0' else '>= 0'}"
                f"{' (0: off)' if kind == 'beat' else ''}, not {text!r}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser, settings: type[Any]) -> None:
    """Add one flag per field of the settings class to ``parser``, each with the field's help and
    default; ``values_from_args`` reads them back."""
    defaults = settings()
    for spec in dataclasses.fields(settings):
        kind: Kind = spec.metadata["kind"]
        flag: str = spec.metadata["flag"]
        default = getattr(defaults, spec.name)
        help_text: str = spec.metadata["help"]
        if kind == "flag":
            parser.add_argument(flag, dest=spec.name, action=argparse.BooleanOptionalAction,
                                default=default,
                                help=f"{help_text} (default {'on' if default else 'off'})")
        elif kind == "origins":
            parser.add_argument(flag, dest=spec.name, action="append", default=[],
                                metavar=spec.metadata["metavar"], help=help_text)
        else:
            shown = spec.metadata["shown"] or (
                _shown(kind, default) + ("; 0: off" if kind == "beat" else ""))
            parser.add_argument(flag, dest=spec.name, default=default,
                                type=_parser_for(kind, none_ok=spec.metadata["none_ok"]),
                                metavar=spec.metadata["metavar"] or "SECONDS",
                                help=f"{help_text} (default {shown})")


def values_from_args(namespace: argparse.Namespace, settings: type[Any]) -> dict[str, Any]:
    """The values of the settings class's fields in parsed ``add_arguments`` flags."""
    return {spec.name: getattr(namespace, spec.name) for spec in dataclasses.fields(settings)}
