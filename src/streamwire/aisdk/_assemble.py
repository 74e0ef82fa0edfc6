"""The assembly of a reply's complete assistant ``UIMessage`` (sans-I/O).

``UIMessageAssembler`` folds a reply's UI message chunks (``UIMessageStreamEncoder.chunks``) into
the message the AI SDK client ends with, by the rules of ``ai@6``'s ``processUIMessageStream``
(what ``readUIMessageStream`` and ``useChat`` run): text and reasoning parts (``state: "done"``
once ended), ``step-start`` parts, tool parts (``tool-<name>``, or ``dynamic-tool``) in their
final state with input, output / error text and approval, sources, files, persistent ``data-*``
parts (one per id), and the metadata merged from ``start``, ``message-metadata`` and ``finish``.
Keys the client leaves ``undefined`` are absent (what ``JSON.stringify`` of its message gives).
The input of a tool call whose input still streams is its deltas' JSON so far, completed
(``partial_json``: open strings, arrays and objects closed, a dangling key or comma dropped), as
the client's ``parsePartialJson`` does for the common cuts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, cast, final

__all__ = ["UIMessageAssembler", "partial_json"]

_UNSET: Final[Any] = object()


# -- the assistant message of a reply ------------------------------------------------------------


def partial_json(text: str) -> Any:
    """The value of JSON text cut anywhere (``_UNSET`` when there is none yet): parsed as is, or
    completed -- an open string closed, a dangling ``,`` / ``:`` / key dropped, the open arrays
    and objects closed."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    stack: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}" and stack:
            stack.pop()
    body = text[:-1] if escaped else text
    if in_string:
        body += '"'
    closers = "".join(reversed(stack))
    candidates = [body + closers]
    trimmed = body.rstrip()
    for _ in range(3):  # drop a dangling ``:``, then its key, then a ``,``
        for cut in (":", ","):
            if trimmed.endswith(cut):
                trimmed = trimmed[:-1].rstrip()
        if trimmed.endswith('"') and stack and stack[-1] == "}":
            start = trimmed.rfind('"', 0, len(trimmed) - 1)
            before = trimmed[:start].rstrip()
            if start > 0 and before.endswith(("{", ",")):
                trimmed = before.rstrip(",").rstrip()
        candidates.append(trimmed + closers)
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return _UNSET


def _set(part: dict[str, Any], key: str, value: Any) -> None:
    if value is _UNSET:
        part.pop(key, None)
    else:
        part[key] = value


def _merge(base: Any, overrides: Any) -> Any:
    """The AI SDK's ``mergeObjects``: nested objects merged, other values replaced."""
    if base is _UNSET:
        return overrides
    if overrides is _UNSET:
        return base
    if not isinstance(base, dict) or not isinstance(overrides, dict):
        return overrides
    result = dict(cast("dict[str, Any]", base))
    for key, value in cast("dict[str, Any]", overrides).items():
        old = result.get(key, _UNSET)
        if isinstance(value, dict) and isinstance(old, dict):  # (null and arrays replace)
            result[key] = _merge(old, value)
        else:
            result[key] = value
    return result


@final
class UIMessageAssembler:
    """UI message chunks in (``feed``), the assistant ``UIMessage`` out (``message``)."""

    def __init__(self, message_id: str = "") -> None:
        self.id = message_id
        self.metadata: Any = _UNSET
        self.parts: list[dict[str, Any]] = []
        self._text: dict[str, dict[str, Any]] = {}
        self._reasoning: dict[str, dict[str, Any]] = {}
        #: tool call id -> (streamed input text, tool name, dynamic)
        self._partial: dict[str, tuple[str, str, bool]] = {}

    @property
    def message(self) -> dict[str, Any]:
        """The message so far (a copy)."""
        out: dict[str, Any] = {"id": self.id, "role": "assistant",
                               "parts": json.loads(json.dumps(self.parts))}
        if self.metadata is not _UNSET:
            out["metadata"] = self.metadata
        return out

    def feed_all(self, chunks: list[Any]) -> None:
        for chunk in chunks:
            self.feed(chunk)

    def feed(self, chunk: Mapping[str, Any]) -> None:
        """Apply one UI message chunk. Chunks the client would throw on (a delta of no part)
        are ignored."""
        kind = chunk.get("type")
        if not isinstance(kind, str):
            return
        get = chunk.get
        if kind in ("text-start", "reasoning-start"):
            part: dict[str, Any] = ({"type": "text", "text": ""} if kind == "text-start"
                                    else {"type": "reasoning", "id": get("id"), "text": ""})
            _set(part, "providerMetadata", get("providerMetadata", _UNSET))
            part["state"] = "streaming"
            (self._text if kind == "text-start" else self._reasoning)[str(get("id"))] = part
            self.parts.append(part)
        elif kind in ("text-delta", "reasoning-delta", "text-end", "reasoning-end"):
            active = self._text if kind.startswith("text") else self._reasoning
            found = active.get(str(get("id")))
            if found is None:
                return
            if kind.endswith("delta"):
                found["text"] += str(get("delta", ""))
            else:
                found["state"] = "done"
                del active[str(get("id"))]
            if get("providerMetadata") is not None:
                found["providerMetadata"] = get("providerMetadata")
        elif kind == "file":
            part = {"type": "file", "mediaType": get("mediaType"), "url": get("url")}
            if get("providerMetadata") is not None:
                part["providerMetadata"] = get("providerMetadata")
            self.parts.append(part)
        elif kind in ("source-url", "source-document"):
            keys = (("sourceId", "url", "title", "providerMetadata") if kind == "source-url" else
                    ("sourceId", "mediaType", "title", "filename", "providerMetadata"))
            part = {"type": kind}
            for key in keys:
                _set(part, key, get(key, _UNSET))
            self.parts.append(part)
        elif kind.startswith("tool-"):
            self._tool(kind, chunk)
        elif kind == "start-step":
            self.parts.append({"type": "step-start"})
        elif kind == "finish-step":
            self._text = {}
            self._reasoning = {}
        elif kind == "start":
            message_id = get("messageId")
            if isinstance(message_id, str):
                self.id = message_id
            self._metadata(get("messageMetadata", _UNSET))
        elif kind in ("finish", "message-metadata"):
            self._metadata(get("messageMetadata", _UNSET))
        elif kind.startswith("data-"):
            if get("transient"):
                return
            if get("id") is not None:
                for old in self.parts:
                    if old.get("type") == kind and old.get("id") == get("id"):
                        old["data"] = get("data")
                        return
            self.parts.append(dict(chunk))

    def _metadata(self, value: Any) -> None:
        if value is not _UNSET and value is not None:
            self.metadata = _merge(self.metadata, value)

    def _step_parts(self) -> list[dict[str, Any]]:
        parts = self.parts
        i = len(parts) - 1
        while i >= 0 and parts[i].get("type") != "step-start":
            i -= 1
        return parts[i + 1:]

    @staticmethod
    def _is_tool(part: Mapping[str, Any]) -> bool:
        kind = str(part.get("type", ""))
        return kind == "dynamic-tool" or kind.startswith("tool-")

    def _invocation(self, call_id: str) -> dict[str, Any] | None:
        """The call's part: in the current step, else the latest anywhere."""
        candidates: list[dict[str, Any]] = [*self._step_parts(), *reversed(self.parts)]
        return next((p for p in candidates
                     if self._is_tool(p) and p.get("toolCallId") == call_id), None)

    def _update(self, dynamic: bool, name: str, call_id: Any, state: str,
                fields: dict[str, Any], existing: dict[str, Any] | None = None) -> None:
        """``updateToolPart`` / ``updateDynamicToolPart``: ``fields`` holds input, output,
        errorText, rawInput, inputEncoding, preliminary, providerExecuted, providerMetadata,
        title, toolMetadata (``_UNSET``: undefined)."""
        if existing is None:
            existing = next((p for p in self._step_parts()
                             if p.get("toolCallId") == call_id
                             and (p.get("type") == "dynamic-tool") == dynamic
                             and self._is_tool(p)), None)
        f = fields.get
        metadata = f("providerMetadata", _UNSET)
        result = state in ("output-available", "output-error")
        if existing is not None:
            existing["state"] = state
            if dynamic:
                existing["toolName"] = name
            else:
                existing["type"] = f"tool-{name}"
            for key in ("input", "output", "errorText", "rawInput"):
                _set(existing, key, f(key, _UNSET))
            _set(existing, "inputEncoding", f("inputEncoding", _UNSET)
                 if f("inputEncoding") is not None else _UNSET)
            _set(existing, "preliminary", f("preliminary", _UNSET))
            for key in ("title", "toolMetadata"):
                if f(key, _UNSET) is not _UNSET:
                    existing[key] = f(key)
            executed = f("providerExecuted", _UNSET)
            if executed is _UNSET or executed is None:
                executed = existing.get("providerExecuted", _UNSET)
            _set(existing, "providerExecuted", executed)
            if metadata is not _UNSET and metadata is not None:
                existing["resultProviderMetadata" if result else "callProviderMetadata"] = metadata
            return
        part: dict[str, Any] = ({"type": "dynamic-tool", "toolName": name} if dynamic
                                else {"type": f"tool-{name}"})
        part["toolCallId"] = call_id
        part["state"] = state
        for key in ("title", "toolMetadata", "input", "output", "rawInput", "errorText",
                    "providerExecuted", "preliminary"):
            _set(part, key, f(key, _UNSET))
        if f("inputEncoding") is not None:
            part["inputEncoding"] = f("inputEncoding")
        if metadata is not _UNSET and metadata is not None:
            part["resultProviderMetadata" if result else "callProviderMetadata"] = metadata
        self.parts.append(part)

    def _tool(self, kind: str, chunk: Mapping[str, Any]) -> None:
        get = chunk.get
        call_id = str(get("toolCallId"))
        passed = {k: get(k, _UNSET) for k in ("providerExecuted", "providerMetadata", "title",
                                              "toolMetadata")}
        if kind == "tool-input-start":
            name, dynamic = str(get("toolName")), bool(get("dynamic"))
            self._partial[call_id] = ("", name, dynamic)
            self._update(dynamic, name, call_id, "input-streaming",
                         {**passed, "inputEncoding": get("inputEncoding")})
        elif kind == "tool-input-delta":
            partial = self._partial.get(call_id)
            if partial is None:
                return
            text = partial[0] + str(get("inputTextDelta", ""))
            self._partial[call_id] = (text, partial[1], partial[2])
            existing = self._invocation(call_id)
            value = partial_json(text)
            self._update(partial[2], partial[1], call_id, "input-streaming",
                         {"input": value, "rawInput": text,
                          "title": _UNSET if existing is None else existing.get("title", _UNSET),
                          "toolMetadata": _UNSET if existing is None
                          else existing.get("toolMetadata", _UNSET)})
        elif kind == "tool-input-available":
            self._update(bool(get("dynamic")), str(get("toolName")), call_id, "input-available",
                         {**passed, "input": get("input", _UNSET)})
        elif kind == "tool-input-error":
            existing = next((p for p in self._step_parts()
                             if self._is_tool(p) and p.get("toolCallId") == call_id), None)
            dynamic = (existing.get("type") == "dynamic-tool" if existing is not None
                       else bool(get("dynamic")))
            fields = {**passed, "errorText": get("errorText", _UNSET)}
            fields.pop("title")
            if dynamic:
                fields["input"] = get("input", _UNSET)
            else:
                fields["rawInput"] = get("input", _UNSET)
            self._update(dynamic, str(get("toolName")), call_id, "output-error", fields)
        else:
            invocation = self._invocation(call_id)
            if invocation is None:
                return
            dynamic = invocation.get("type") == "dynamic-tool"
            name = (str(invocation.get("toolName")) if dynamic
                    else str(invocation.get("type", "")).split("-", 1)[1])
            if kind == "tool-approval-request":
                invocation["state"] = "approval-requested"
                approval: dict[str, Any] = {"id": get("approvalId")}
                if get("approvalDescriptor") is not None:
                    approval["descriptor"] = get("approvalDescriptor")
                if "inputSchemaInput" in chunk:
                    approval["inputSchemaInput"] = get("inputSchemaInput")
                if get("signature") is not None:
                    approval["signature"] = get("signature")
                invocation["approval"] = approval
            elif kind == "tool-output-denied":
                invocation["state"] = "output-denied"
            elif kind in ("tool-output-available", "tool-output-error"):
                metadata = get("toolMetadata", _UNSET)
                fields = {"providerExecuted": get("providerExecuted", _UNSET),
                          "providerMetadata": get("providerMetadata", _UNSET),
                          "input": invocation.get("input", _UNSET),
                          "title": invocation.get("title", _UNSET),
                          "toolMetadata": metadata if metadata is not _UNSET and metadata
                          is not None else invocation.get("toolMetadata", _UNSET)}
                if kind == "tool-output-available":
                    fields["output"] = get("output", _UNSET)
                    fields["preliminary"] = get("preliminary", _UNSET)
                else:
                    fields["errorText"] = get("errorText", _UNSET)
                    if not dynamic:
                        fields["rawInput"] = invocation.get("rawInput", _UNSET)
                state = "output-available" if kind == "tool-output-available" else "output-error"
                self._update(dynamic, name, call_id, state, fields, invocation)
