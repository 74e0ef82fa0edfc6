"""A thread's UIMessages as OpenAI's input: Chat Completions ``messages`` and Responses ``input``
items (sans-I/O; the step and tool rules are ``streamwire.providers._ui``'s)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import msgspec

from .._ui import (
    FilePart,
    ModelMessage,
    TextPart,
    ToolResult,
    ToolUse,
    UIMessageError,
    data_url,
    model_messages,
)

__all__ = ["messages_from_ui", "responses_input_from_ui"]

_encode: Final = msgspec.json.Encoder().encode


def messages_from_ui(ui_messages: Iterable[Mapping[str, Any]], *,
                     api: Literal["chat", "responses"] = "chat") -> list[dict[str, Any]]:
    """The Chat Completions ``messages`` for a thread's UIMessages (``api="responses"``: the
    Responses API's ``input`` items, ``responses_input_from_ui``).

    Text and images (``file`` parts with an ``image/*`` type, as a ``data:`` URL or a web
    address) go as content parts, PDFs as ``file`` parts (``data:`` URLs only); an assistant
    message's steps become assistant messages with ``tool_calls`` followed by one ``tool``
    message per result.

    Raises:
        UIMessageError: the history is not UIMessages, or holds a file OpenAI does not read.
    """
    if api == "responses":
        return responses_input_from_ui(ui_messages)
    out: list[dict[str, Any]] = []
    for message in model_messages(ui_messages):
        if message.role == "system":
            out.append({"role": "system", "content": _joined(message)})
        elif message.role == "user":
            out.append({"role": "user", "content": _user_content(message, _chat_file)})
        elif message.role == "assistant":
            assistant: dict[str, Any] = {"role": "assistant", "content": _joined(message) or None}
            calls = [{"id": p.call_id, "type": "function",
                      "function": {"name": p.name, "arguments": _json(p.input)}}
                     for p in message.parts if isinstance(p, ToolUse)]
            if calls:
                assistant["tool_calls"] = calls
            out.append(assistant)
        else:
            out += [{"role": "tool", "tool_call_id": p.call_id, "content": p.text}
                    for p in message.parts if isinstance(p, ToolResult)]
    return out


def responses_input_from_ui(ui_messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Responses API's ``input`` items for a thread's UIMessages: messages with
    ``input_text``/``input_image``/``input_file`` content, ``function_call`` items and their
    ``function_call_output`` items (by ``call_id``).

    Raises:
        UIMessageError: as ``messages_from_ui``.
    """
    out: list[dict[str, Any]] = []
    for message in model_messages(ui_messages):
        if message.role == "system":
            out.append({"role": "system", "content": _joined(message)})
        elif message.role == "user":
            out.append({"role": "user", "content": _user_content(message, _responses_file)})
        elif message.role == "assistant":
            text = _joined(message)
            if text:
                out.append({"role": "assistant", "content": text})
            out += [{"type": "function_call", "call_id": p.call_id, "name": p.name,
                     "arguments": _json(p.input)}
                    for p in message.parts if isinstance(p, ToolUse)]
        else:
            out += [{"type": "function_call_output", "call_id": p.call_id, "output": p.text}
                    for p in message.parts if isinstance(p, ToolResult)]
    return out


def _joined(message: ModelMessage) -> str:
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


def _json(value: Any) -> str:
    return _encode({} if value is None else value).decode()


def _user_content(message: ModelMessage, file: Any) -> str | list[dict[str, Any]]:
    parts = message.parts
    if all(isinstance(p, TextPart) for p in parts):
        return _joined(message)  # the plain form every OpenAI-compatible server takes
    text_type = "input_text" if file is _responses_file else "text"
    return [{"type": text_type, "text": p.text} if isinstance(p, TextPart) else file(p)
            for p in parts if isinstance(p, TextPart | FilePart)]


def _chat_file(part: FilePart) -> dict[str, Any]:
    if part.media_type.startswith("image/"):
        data_url(part.url)  # checks a data: URL's base64
        return {"type": "image_url", "image_url": {"url": part.url}}
    if part.media_type == "application/pdf" and data_url(part.url) is not None:
        return {"type": "file", "file": {"filename": part.filename or "file.pdf",
                                         "file_data": part.url}}
    raise UIMessageError(f"OpenAI Chat Completions takes images and PDFs (as data: URLs), "
                         f"not a file of type {part.media_type!r}")


def _responses_file(part: FilePart) -> dict[str, Any]:
    if part.media_type.startswith("image/"):
        data_url(part.url)
        return {"type": "input_image", "image_url": part.url, "detail": "auto"}
    if part.media_type == "application/pdf":
        if data_url(part.url) is None:
            return {"type": "input_file", "file_url": part.url}
        return {"type": "input_file", "filename": part.filename or "file.pdf",
                "file_data": part.url}
    raise UIMessageError(f"the OpenAI Responses API takes images and PDFs, not a file of "
                         f"type {part.media_type!r}")
