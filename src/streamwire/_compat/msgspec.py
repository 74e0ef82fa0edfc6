"""The text of msgspec's ``ValidationError``, read as data: the one place streamwire depends on how
msgspec words an error (msgspec gives no structured form of it: the message is all there is).

msgspec says ``<what is wrong> - at `<path>``` (``$``, ``$.field``, ``$[0].step``), and names a
missing or unknown field as ``Object missing required field `name``` / ``Object contains unknown
field `name```. ``parse_validation_error`` reads those parts, and returns None when the message
does not have that shape. The shape is checked once, at import, against the installed msgspec with
a real ``ValidationError``: if it moved, every call returns None (the fallback: callers send
msgspec's message as it is) and one warning names the version.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
from dataclasses import dataclass
from typing import Final

import msgspec

__all__ = ["ValidationProblem", "parse_validation_error"]

logger = logging.getLogger("streamwire.server")

_AT: Final = " - at `"
_FIELD: Final = re.compile(r"Object (missing required|contains unknown) field `(.+)`")


@dataclass(frozen=True, slots=True)
class ValidationProblem:
    """One msgspec validation message, taken apart."""

    #: what is wrong, without the location (``Expected `int`, got `str```)
    text: str
    #: where: ``$`` (the document), ``$.field``, ``$[0].step``; a named field is appended
    path: str
    #: the field a missing / unknown field message names, else None
    field: str | None = None
    #: True: that field is missing; False: it is not a field of the object
    missing: bool = False


def _parse(message: str) -> ValidationProblem:
    text, _, at = message.partition(_AT)
    path = at.rstrip("`") or "$"
    named = _FIELD.fullmatch(text)
    if named is None:
        return ValidationProblem(text, path)
    return ValidationProblem(text, f"{path}.{named.group(2)}", named.group(2),
                             named.group(1) == "missing required")


class _Probe(msgspec.Struct, forbid_unknown_fields=True):
    step: int


def _shape_holds() -> bool:
    """Does the installed msgspec still word its errors the way ``_parse`` reads them?"""
    expected = {
        b'[{"step": "x"}]': ValidationProblem("Expected `int`, got `str`", "$[0].step"),
        b"[{}]": ValidationProblem("Object missing required field `step`", "$[0].step", "step",
                                   True),
        b'[{"step": 1, "zz": 2}]': ValidationProblem("Object contains unknown field `zz`",
                                                     "$[0].zz", "zz", False),
    }
    for doc, problem in expected.items():
        try:
            msgspec.json.decode(doc, type=list[_Probe])
        except msgspec.ValidationError as exc:
            if _parse(str(exc)) != problem:
                return False
        else:
            return False
    return True


_SHAPE_HOLDS: Final = _shape_holds()
if not _SHAPE_HOLDS:
    logger.warning("msgspec %s words its validation errors differently from the versions "
                   "streamwire reads; 422 answers carry msgspec's message as it is",
                   importlib.metadata.version("msgspec"))


def parse_validation_error(message: str) -> ValidationProblem | None:
    """``message`` (a ``msgspec.ValidationError``'s text) taken apart, or None when the installed
    msgspec does not word its errors the way this module reads them."""
    return _parse(message) if _SHAPE_HOLDS else None
