"""The ``useChat`` request (``DefaultChatTransport``'s POST body) -> the run it starts (sans-I/O).

The body is the app's own ``body`` fields plus ``{id, messages, trigger, messageId}`` (or, by the
AI SDK's ``prepareSendMessagesRequest`` recipe, ``{id, message}``: the new message alone). Only the
new message -- the last user message -- is taken from it: the history is the server's thread
(``_threads``), never the client's copy. The run:

* its input is ``{**app fields, "prompt", "chatId", "messageId", "messages"}``: ``prompt`` is the
  text of the new user message (what a simple agent answers), ``messages`` the thread's stored
  history then that message (what a real one reads, ``input_for``), ``messageId`` its id;
* its id names the request (``run_id_for``), so a double submit (the same chat, user message and
  text) finds the first run instead of starting a second; an edited message (same id, other text)
  is a new run; ``regenerate-message`` names the reply it replaces (the body's ``messageId``, else
  the thread's reply to that user message), so a retried regenerate joins its run and the next
  regenerate (of the new reply) is a new one;
* the reply's assistant message id is ``<run id>-assistant``: the POST and every resume send the
  same one in ``start``, so a resumed reply replaces the message instead of appending a copy;
* a body whose last message is that assistant message continues its run (``continues``): the
  SDK resends after ``addToolApprovalResponse`` or ``addToolOutput``, and ``tool_answers`` are
  the message's answered tool parts as a resume's ``toolAnswers`` (``streamwire.runs``), to be
  checked against what the run waits for.

Chat ids live in their own part of the stream id space: every id beginning ``chat:``
(``CHAT_PREFIX``) is the chat routes' -- a chat's index stream ``chat:<chat id>`` and its runs
``chat:<chat id>:<key>`` (chat ids hold no ``:``, so the two never meet). The server refuses that
prefix wherever a client names an id itself (a ``runId``, a plain stream write).
"""

from __future__ import annotations

import hashlib
from typing import Any, Final, cast, final

import msgspec

__all__ = ["CHAT_ID_CHARS", "CHAT_PREFIX", "MAX_CHAT_ID_LENGTH", "ChatRequest",
           "assistant_message_id", "chat_stream_id", "check_chat_id", "tool_answers"]

#: Characters of a chat id (a URL path segment and part of a stream id in every backend).
CHAT_ID_CHARS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")
#: The prefix of every id the chat routes make (index streams and runs); no client names one.
CHAT_PREFIX: Final = "chat:"
#: Characters of a chat id at most.
MAX_CHAT_ID_LENGTH: Final = 128
_TRANSPORT_FIELDS: Final = frozenset({"id", "messages", "message", "trigger", "messageId"})
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


_ASSISTANT_SUFFIX: Final = "-assistant"


def assistant_message_id(run_id: str) -> str:
    """The id of the assistant message a chat run answers with."""
    return f"{run_id}{_ASSISTANT_SUFFIX}"


_decode_body: Final = msgspec.json.Decoder(dict[str, Any]).decode
_encode: Final = msgspec.json.Encoder().encode


def _is_user_message(value: dict[str, Any]) -> bool:
    return value.get("role") == "user"


def _text(message: dict[str, Any]) -> str:
    parts: object = message.get("parts")
    if not isinstance(parts, list):
        raise msgspec.ValidationError("a message's `parts` must be an array")
    text: list[str] = []
    for item in cast("list[object]", parts):
        part = cast("dict[str, Any]", item) if isinstance(item, dict) else None
        if part is None or not isinstance(part.get("type"), str):
            raise msgspec.ValidationError("a message part must be an object with a `type`")
        if part["type"] == "text":
            if not isinstance(part.get("text"), str):
                raise msgspec.ValidationError("a text part's `text` must be a string")
            text.append(part["text"])
    return "".join(text)


@final
class ChatRequest(msgspec.Struct, frozen=True):
    """One ``POST /api/chat``: the chat, its trigger, the new user message (as sent: it is
    stored) and the app's extra fields; the run it starts is ``run_id_for`` / ``input_for``."""

    chat_id: str
    trigger: str
    user_message: dict[str, Any]
    user_message_id: str
    prompt: str
    #: ``regenerate-message``: the id of the reply to replace, when the body names one
    replaces: str | None
    extra: dict[str, Any]
    #: the run the body continues (its last message is that run's assistant message), if any
    continues: str | None = None
    #: that message's answered tool parts, as a resume's ``toolAnswers``
    tool_answers: tuple[dict[str, Any], ...] = ()

    @property
    def regenerate(self) -> bool:
        return self.trigger == "regenerate-message"

    def run_id_for(self, replaced: str | None = None) -> str:
        """The run id of this request; ``replaced`` is the thread's reply this regenerate
        replaces (the body's ``messageId`` wins)."""
        if self.regenerate:
            parts = [self.chat_id, "regenerate", self.user_message_id,
                     self.replaces or replaced or ""]
        else:
            parts = [self.chat_id, self.user_message_id, self.prompt]
        key = hashlib.sha256(_encode(parts)).hexdigest()[:32]
        return f"{CHAT_PREFIX}{self.chat_id}:{key}"

    def input_for(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        """The run's input: the app's fields, ``prompt``, ``chatId``, ``messageId`` and
        ``messages`` (``history``, the thread's messages before the new one, then it)."""
        return {**self.extra, "prompt": self.prompt, "chatId": self.chat_id,
                "messageId": self.user_message_id, "messages": [*history, self.user_message]}

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
        raw = fields.get("messages")
        if raw is None and "message" in fields:
            raw = [fields["message"]]
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            raise msgspec.ValidationError("`messages` must be an array")
        messages: list[dict[str, Any]] = []
        for item in cast("list[object]", raw):
            if not isinstance(item, dict):
                raise msgspec.ValidationError("a message must be an object with a `role`")
            message = cast("dict[str, Any]", item)
            if not isinstance(message.get("role"), str):
                raise msgspec.ValidationError("a message must be an object with a `role`")
            messages.append(message)
        user = next((m for m in reversed(messages) if _is_user_message(m)), None)
        prompt = "" if user is None else _text(user)
        if user is None or not prompt:
            raise ValueError("the request has no user message with text to answer")
        user = dict(user)
        user_id = user.get("id") or ""
        if not isinstance(user_id, str):
            raise msgspec.ValidationError("a message's `id` must be a string")
        if not user_id:  # the thread places messages by id: name it after its chat and text
            user["id"] = user_id = "user-" + hashlib.sha256(
                _encode([chat_id, prompt])).hexdigest()[:16]
        replaces = fields.get("messageId") if trigger == "regenerate-message" else None
        extra = {k: v for k, v in fields.items() if k not in _TRANSPORT_FIELDS}
        last = messages[-1]
        continues = _continued_run(chat_id, last) if trigger == "submit-message" else None
        return cls(chat_id, trigger, user, user_id, prompt,
                   replaces if isinstance(replaces, str) and replaces else None, extra,
                   continues, tool_answers(last) if continues is not None else ())


def _continued_run(chat_id: str, message: dict[str, Any]) -> str | None:
    """The run whose assistant message ``message`` is (one of this chat's), else None."""
    message_id = message.get("id")
    if message.get("role") != "assistant" or not isinstance(message_id, str):
        return None
    run_id = message_id.removesuffix(_ASSISTANT_SUFFIX)
    if run_id == message_id or not run_id.startswith(f"{CHAT_PREFIX}{chat_id}:"):
        return None
    return run_id


def tool_answers(message: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The answered tool parts of a UI message as ``toolAnswers``: an approval the user
    answered (``approval-responded``: ``approvalId``, ``approved``, ``reason``), a client tool's
    output (``output-available``) or error (``output-error``). Whether the run waits for them is
    the run's to check."""
    parts: object = message.get("parts")
    out: list[dict[str, Any]] = []
    for item in cast("list[object]", parts) if isinstance(parts, list) else []:
        if not isinstance(item, dict):
            continue
        part = cast("dict[str, Any]", item)
        kind, call_id, state = part.get("type"), part.get("toolCallId"), part.get("state")
        if not (isinstance(kind, str) and kind.startswith(("tool-", "dynamic-tool"))
                and isinstance(call_id, str)):
            continue
        approval: object = part.get("approval")
        if state == "approval-responded" and isinstance(approval, dict):
            answer = cast("dict[str, Any]", approval)
            entry = {"toolCallId": call_id, "approvalId": answer.get("id"),
                     "approved": answer.get("approved")}
            if isinstance(answer.get("reason"), str):
                entry["reason"] = answer["reason"]
            out.append(entry)
        elif state == "output-available":
            out.append({"toolCallId": call_id, "output": part.get("output")})
        elif state == "output-error":
            out.append({"toolCallId": call_id, "errorText": str(part.get("errorText", ""))})
    return tuple(out)
