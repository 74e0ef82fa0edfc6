"""The ``useChat`` request (``DefaultChatTransport``'s POST body) -> the run it starts (sans-I/O).

The body is the app's own ``body`` fields plus ``{id, messages, trigger, messageId}``. The run:

* its input is ``{**app fields, "prompt", "chatId", "messageId", "messages"}``: ``prompt`` is the
  text of the last user message (what a simple agent answers), ``messages`` the whole history as
  sent (what a real one reads), ``messageId`` that user message's id;
* its id names the request, so a double submit (the same chat, user message and text) finds the
  first run instead of starting a second; an edited message (same id, other text) is a new run;
  ``regenerate-message`` asks for a new reply on purpose and always gets a fresh run;
* the reply's assistant message id is ``<run id>-assistant``: the POST and every resume send the
  same one in ``start``, so a resumed reply replaces the message instead of appending a copy.

Chat ids live in their own part of the stream id space: every id beginning ``chat:``
(``CHAT_PREFIX``) is the chat routes' -- a chat's index stream ``chat:<chat id>`` and its runs
``chat:<chat id>:<key>`` (chat ids hold no ``:``, so the two never meet). The server refuses that
prefix wherever a client names an id itself (a ``runId``, a plain stream write).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Final, final

import msgspec

__all__ = ["CHAT_ID_CHARS", "CHAT_PREFIX", "MAX_CHAT_ID_LENGTH", "ChatRequest",
           "assistant_message_id", "chat_stream_id", "check_chat_id"]

#: Characters of a chat id (a URL path segment and part of a stream id in every backend).
CHAT_ID_CHARS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")
#: The prefix of every id the chat routes make (index streams and runs); no client names one.
CHAT_PREFIX: Final = "chat:"
#: Characters of a chat id at most.
MAX_CHAT_ID_LENGTH: Final = 128
_TRANSPORT_FIELDS: Final = frozenset({"id", "messages", "trigger", "messageId"})
_TRIGGERS: Final = frozenset({"submit-message", "regenerate-message"})


def check_chat_id(chat_id: str) -> str:
    """``chat_id`` if it is 1 to ``MAX_CHAT_ID_LENGTH`` characters of ``CHAT_ID_CHARS``.

    Raises:
        ValueError: saying what a chat id may be.
    """
    if not chat_id or len(chat_id) > MAX_CHAT_ID_LENGTH or not CHAT_ID_CHARS.issuperset(chat_id):
        raise ValueError(f"a chat id is 1 to {MAX_CHAT_ID_LENGTH} characters among A-Z a-z 0-9 "
                         f"- _ . ~, not {chat_id[:40]!r}")
    return chat_id


def chat_stream_id(chat_id: str) -> str:
    """The id of the stream that lists a chat's runs (its index)."""
    return f"{CHAT_PREFIX}{chat_id}"


def assistant_message_id(run_id: str) -> str:
    """The id of the assistant message a chat run answers with."""
    return f"{run_id}-assistant"


@final
class _Part(msgspec.Struct, frozen=True):
    type: str
    text: str | None = None


@final
class _UIMessage(msgspec.Struct, frozen=True):
    role: str
    id: str = ""
    parts: list[_Part] = []


_decode_messages: Final = msgspec.json.Decoder(list[_UIMessage]).decode
_decode_body: Final = msgspec.json.Decoder(dict[str, Any]).decode
_encode: Final = msgspec.json.Encoder().encode


@final
class ChatRequest(msgspec.Struct, frozen=True):
    """One ``POST /api/chat``: the chat, the run it starts (``run_id``, ``input``) and its reply's
    assistant message id."""

    chat_id: str
    trigger: str
    user_message_id: str
    prompt: str
    run_id: str
    input: dict[str, Any]

    @property
    def message_id(self) -> str:
        """The assistant message id of the reply."""
        return assistant_message_id(self.run_id)

    @classmethod
    def parse(cls, body: bytes) -> ChatRequest:
        """Read a ``DefaultChatTransport`` body.

        Raises:
            msgspec.DecodeError: the body is not JSON.
            msgspec.ValidationError: a field has the wrong shape.
            ValueError: no chat id, no user message with text, or an unknown trigger.
        """
        fields = _decode_body(body)
        chat_id = fields.get("id")
        if not isinstance(chat_id, str):
            raise msgspec.ValidationError("`id` (the chat id) must be a string")
        check_chat_id(chat_id)
        trigger = fields.get("trigger", "submit-message")
        if trigger not in _TRIGGERS:
            raise ValueError(f"trigger must be one of {sorted(_TRIGGERS)}, not {trigger!r}")
        raw_messages = fields.get("messages")
        messages = _decode_messages(_encode(raw_messages if raw_messages is not None else []))
        user = next((m for m in reversed(messages) if m.role == "user"), None)
        prompt = "" if user is None else "".join(p.text or "" for p in user.parts
                                                  if p.type == "text")
        if user is None or not prompt:
            raise ValueError("the request has no user message with text to answer")
        extra = {k: v for k, v in fields.items() if k not in _TRANSPORT_FIELDS}
        run_input = {**extra, "prompt": prompt, "chatId": chat_id, "messageId": user.id,
                     "messages": raw_messages}
        if trigger == "regenerate-message":
            key = uuid.uuid4().hex
        else:
            key = hashlib.sha256(_encode([chat_id, user.id, prompt])).hexdigest()[:32]
        return cls(chat_id, trigger, user.id, prompt, f"{CHAT_PREFIX}{chat_id}:{key}", run_input)
