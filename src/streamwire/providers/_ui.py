"""A thread's AI SDK UIMessages as provider-neutral messages (``ModelMessage``), which each adapter
turns into its provider's shape (sans-I/O).

The rules are the AI SDK's ``convertToModelMessages``:

* ``system`` messages give their text; ``user`` messages their text and files;
* an ``assistant`` message is cut into steps: a step's text and tool calls form one assistant
  message, its tool results one ``tool`` message after it; a ``step-start`` part, or text after
  a tool call, begins the next step;
* a tool part (``tool-<name>``, or ``dynamic-tool`` with ``toolName``) is sent only once it has
  a result: ``output-available`` (its ``output``), ``output-error`` (its ``errorText``, as an
  error) or ``output-denied`` (``DENIED``, as an error); a call still waiting for its input,
  its output or an approval is left out (providers refuse a call without its result);
* ``reasoning``, ``step-start``, ``source-*`` and ``data-*`` parts carry nothing a provider
  takes back.

Anything else -- not a list of messages, a message with no ``role`` or ``parts``, a part that is
not an object -- raises ``UIMessageError`` saying where.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias, cast, final

import msgspec

from ..errors import UsageError

__all__ = [
    "DENIED",
    "FilePart",
    "ModelMessage",
    "TextPart",
    "ToolResult",
    "ToolUse",
    "UIMessageError",
    "data_url",
    "model_messages",
]

#: The result a provider is given for a tool call the user denied.
DENIED: Final = "The user denied this tool call."
_TOOL_RESULT_STATES: Final = frozenset({"output-available", "output-error", "output-denied"})
_encode: Final = msgspec.json.Encoder().encode


class UIMessageError(UsageError, ValueError):
    """A UIMessage history that is not the AI SDK's shape (or holds what the provider cannot
    take, such as a file type it does not read)."""


@final
@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@final
@dataclass(frozen=True, slots=True)
class FilePart:
    """A file: ``url`` is a ``data:`` URL or a web address."""

    media_type: str
    url: str
    filename: str | None = None


@final
@dataclass(frozen=True, slots=True)
class ToolUse:
    call_id: str
    name: str
    input: Any


@final
@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool call's result: ``text`` is what the model reads (the output as JSON text, the
    error's text, or ``DENIED``); ``is_error`` for an error or a denial."""

    call_id: str
    name: str
    output: Any
    text: str
    is_error: bool = False


Part: TypeAlias = TextPart | FilePart | ToolUse | ToolResult
Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


@final
@dataclass(slots=True)
class ModelMessage:
    role: Role
    parts: list[Part] = field(default_factory=list[Part])


def data_url(url: str) -> tuple[str, str] | None:
    """``(media type, base64 data)`` of a base64 ``data:`` URL; None for any other URL.

    Raises:
        UIMessageError: a ``data:`` URL that is not base64, or whose data is not.
    """
    if not url.startswith("data:"):
        return None
    head, comma, data = url[5:].partition(",")
    if not comma or not head.endswith(";base64"):
        raise UIMessageError("a file's data: URL must be base64 (data:<type>;base64,<data>)")
    try:
        b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UIMessageError(f"a file's data: URL holds invalid base64: {exc}") from None
    return head.removesuffix(";base64") or "application/octet-stream", data


def model_messages(ui_messages: Iterable[Mapping[str, Any]]) -> list[ModelMessage]:
    """The provider-neutral messages of ``ui_messages`` (module docstring)."""
    if isinstance(ui_messages, str | bytes | Mapping):
        raise UIMessageError("messages_from_ui takes a list of UIMessages")
    out: list[ModelMessage] = []
    for i, message in enumerate(cast(Iterable[object], ui_messages)):
        if not isinstance(message, Mapping):
            raise UIMessageError(f"message {i} is not an object")
        fields = cast(Mapping[str, Any], message)
        role = fields.get("role")
        parts = fields.get("parts")
        if role not in ("system", "user", "assistant") or not isinstance(parts, Sequence):
            raise UIMessageError(f"message {i} needs a role (system, user, assistant) and a "
                                 "list of parts")
        for j, part in enumerate(cast(Sequence[object], parts)):
            if not isinstance(part, Mapping) or not isinstance(
                    cast(Mapping[str, Any], part).get("type"), str):
                raise UIMessageError(f"message {i}, part {j}: not an object with a type")
        typed = cast(Sequence[Mapping[str, Any]], parts)
        if role == "assistant":
            out += _assistant(typed, i)
        else:
            out.append(ModelMessage(role, _user_parts(typed, i, files=role == "user")))
    return out


def _user_parts(parts: Sequence[Mapping[str, Any]], i: int, *, files: bool) -> list[Part]:
    found: list[Part] = []
    for j, part in enumerate(parts):
        kind = part["type"]
        if kind == "text":
            found.append(TextPart(_text(part, i, j)))
        elif kind == "file" and files:
            found.append(_file(part, i, j))
    return found


def _assistant(parts: Sequence[Mapping[str, Any]], i: int) -> list[ModelMessage]:
    steps: list[ModelMessage] = []
    calls: list[Part] = []
    results: list[Part] = []
    content: list[Part] = []

    def flush() -> None:
        if content or calls:
            steps.append(ModelMessage("assistant", content + calls))
        if results:
            steps.append(ModelMessage("tool", list(results)))
        content.clear()
        calls.clear()
        results.clear()

    for j, part in enumerate(parts):
        kind: str = part["type"]
        if kind == "step-start":
            flush()
        elif kind == "text":
            if calls:
                flush()  # text after a tool call is the next step's
            text = _text(part, i, j)
            if text:
                content.append(TextPart(text))
        elif kind.startswith("tool-") or kind == "dynamic-tool":
            call = _tool(part, kind, i, j)
            if call is not None:
                calls.append(call[0])
                results.append(call[1])
    flush()
    return steps


def _text(part: Mapping[str, Any], i: int, j: int) -> str:
    text = part.get("text")
    if not isinstance(text, str):
        raise UIMessageError(f"message {i}, part {j}: a text part needs a text string")
    return text


def _file(part: Mapping[str, Any], i: int, j: int) -> FilePart:
    media, url, name = part.get("mediaType"), part.get("url"), part.get("filename")
    if not isinstance(media, str) or not isinstance(url, str):
        raise UIMessageError(f"message {i}, part {j}: a file part needs mediaType and url")
    return FilePart(media, url, name if isinstance(name, str) else None)


def _tool(part: Mapping[str, Any], kind: str, i: int, j: int) -> tuple[ToolUse, ToolResult] | None:
    state = part.get("state")
    if state not in _TOOL_RESULT_STATES:
        return None
    call_id = part.get("toolCallId")
    name = part.get("toolName") if kind == "dynamic-tool" else kind[5:]
    if not isinstance(call_id, str) or not isinstance(name, str) or not name:
        raise UIMessageError(f"message {i}, part {j}: a tool part needs a toolCallId (and "
                             "dynamic-tool a toolName)")
    use = ToolUse(call_id, name, part.get("input"))
    if state == "output-available":
        output = part.get("output")
        text = output if isinstance(output, str) else _encode(output).decode()
        return use, ToolResult(call_id, name, output, text)
    if state == "output-error":
        error = part.get("errorText")
        text = error if isinstance(error, str) and error else "The tool failed."
        return use, ToolResult(call_id, name, None, text, is_error=True)
    return use, ToolResult(call_id, name, None, DENIED, is_error=True)
