"""The SSE encoder: events to bytes that no field value can break out of (no frame injection)."""

from __future__ import annotations

__all__ = ["encode_comment", "encode_frame"]


def _check_field(name: str, value: str, *, nul: bool) -> None:
    if "\n" in value or "\r" in value or (nul and "\x00" in value):
        forbidden = "CR, LF or NUL" if nul else "CR or LF"
        raise ValueError(f"SSE {name} must not contain {forbidden} (frame injection): {value!r}")


def encode_frame(
    data: str,
    *,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
) -> bytes:
    """Serialise one SSE event. Multi-line ``data`` (LF, CR or CRLF) becomes several ``data:`` lines.

    Raises:
        ValueError: ``event`` or ``id`` contains CR or LF, ``id`` contains NUL, or ``retry`` is not
            a non-negative int.
    """
    head = ""
    if event is not None:
        _check_field("event", event, nul=False)
        head = f"event: {event}\n"
    if id is not None:
        _check_field("id", id, nul=True)
        head = f"{head}id: {id}\n"
    if retry is not None:
        if type(retry) is not int or retry < 0:
            raise ValueError(f"SSE retry must be a non-negative int, got {retry!r}")
        head = f"{head}retry: {retry}\n"
    if "\n" in data or "\r" in data:
        data = data.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\ndata: ")
    return f"{head}data: {data}\n\n".encode()


def encode_comment(text: str = "") -> bytes:
    """Serialise a comment (``: text``), e.g. a heartbeat. Each line of ``text`` stays a comment."""
    if "\n" in text or "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\n: ")
    return f": {text}\n\n".encode() if text else b":\n\n"
