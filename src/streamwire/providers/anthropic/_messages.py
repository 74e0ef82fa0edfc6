"""A thread's UIMessages as Anthropic's Messages API input: ``messages`` and the ``system`` prompt
apart (sans-I/O; the step and tool rules are ``streamwire.providers._ui``'s)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, cast

from .._ui import FilePart, TextPart, ToolResult, ToolUse, UIMessageError, data_url, model_messages

__all__ = ["AnthropicInput", "messages_from_ui"]


class AnthropicInput(NamedTuple):
    """``system`` (None when the thread has no system message) and ``messages``:
    ``client.messages.create(model=..., max_tokens=..., **prompt.kwargs(), stream=True)``."""

    system: str | None
    messages: list[dict[str, Any]]

    def kwargs(self) -> dict[str, Any]:
        """``{"messages": ..., "system": ...}`` (no ``system`` key when there is none)."""
        if self.system is None:
            return {"messages": self.messages}
        return {"messages": self.messages, "system": self.system}


def messages_from_ui(ui_messages: Iterable[Mapping[str, Any]]) -> AnthropicInput:
    """Anthropic's input for a thread's UIMessages.

    System messages are joined into ``system``. User text and files become ``text``, ``image``
    (``image/*``: a ``data:`` URL as a base64 source, a web address as a URL source) and
    ``document`` (PDF) blocks; an assistant message's steps become assistant messages with
    ``tool_use`` blocks, each followed by a user message of its ``tool_result`` blocks
    (``is_error`` for a failed or denied call). Messages of the same role in a row are merged,
    as the API wants roles to alternate.

    Raises:
        UIMessageError: the history is not UIMessages, or holds a file Anthropic does not read.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for message in model_messages(ui_messages):
        if message.role == "system":
            system += [p.text for p in message.parts if isinstance(p, TextPart)]
            continue
        blocks: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                if part.text:
                    blocks.append({"type": "text", "text": part.text})
            elif isinstance(part, FilePart):
                blocks.append(_file(part))
            elif isinstance(part, ToolUse):
                blocks.append({"type": "tool_use", "id": part.call_id, "name": part.name,
                               "input": _object(part.input)})
            else:
                blocks.append(_result(part))
        if not blocks:
            continue
        role = "assistant" if message.role == "assistant" else "user"
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    return AnthropicInput("\n\n".join(system) if system else None, out)


def _object(value: Any) -> dict[str, Any]:
    """A tool input as the object Anthropic's ``tool_use.input`` must be."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _result(part: ToolResult) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id,
                             "content": part.text}
    if part.is_error:
        block["is_error"] = True
    return block


def _file(part: FilePart) -> dict[str, Any]:
    inline = data_url(part.url)
    if part.media_type.startswith("image/"):
        kind = "image"
    elif part.media_type == "application/pdf":
        kind = "document"
    else:
        raise UIMessageError(f"Anthropic takes images and PDFs, not a file of type "
                             f"{part.media_type!r}")
    if inline is None:
        return {"type": kind, "source": {"type": "url", "url": part.url}}
    return {"type": kind, "source": {"type": "base64", "media_type": inline[0],
                                     "data": inline[1]}}
