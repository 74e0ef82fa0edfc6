"""``serve --log-format json``: every log record as one JSON object on one line.

The keys: ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``, ``message`` (the
formatted message), then every field the call passed in ``extra`` -- streamwire's own records
carry ``stream_id``, ``run_id``, ``agent``, ``status`` and ``code`` where they are known -- and
``exception`` (the formatted traceback) when there is one. A value JSON cannot hold is written as
its ``str``. The ``text`` format is the one ``serve`` has always written.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, Final, Literal

import msgspec

__all__ = ["TEXT_FORMAT", "JSONFormatter", "configure_logging"]

#: The ``--log-format text`` line.
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: What every ``LogRecord`` has: anything else on a record came in ``extra``.
_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "taskName"}

_ENCODER: Final = msgspec.json.Encoder(enc_hook=str)


class JSONFormatter(logging.Formatter):
    """One JSON object per record (see the module)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        try:
            return _ENCODER.encode(entry).decode()
        except (TypeError, ValueError, OverflowError):  # a value str() could not save (a cycle)
            entry = {k: v if isinstance(v, str) else repr(v) for k, v in entry.items()}
            return _ENCODER.encode(entry).decode()


def configure_logging(level: str, log_format: Literal["text", "json"]) -> None:
    """The root logger as ``serve`` sets it up: ``level`` and one stderr handler writing
    ``log_format``."""
    if log_format == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(JSONFormatter())
        logging.basicConfig(level=level.upper(), handlers=[handler])
    else:
        logging.basicConfig(level=level.upper(), format=TEXT_FORMAT)
