"""One message per event and union variant of the chat contract, with its exact wire JSON, and two
small user contracts: the writer, reader and end-to-end tests share them, so every chat event is
checked on both sides."""

from __future__ import annotations

from typing import Any, Final, TypedDict, final

from streamwire.chat import Chat, ConversationStep, ModelInfo
from streamwire.contract import Contract, Event, Message

MODEL: Final[ModelInfo] = {"id": "claude-x", "displayName": "Claude X", "provider": "anthropic"}
STEP: Final[ConversationStep] = {"id": "s1", "label": "Searching the web", "status": "active",
                                 "toolName": "search"}

#: One message per event and union variant of the chat contract, with its exact wire JSON. The
#: reader and end-to-end tests reuse it, so every chat event is checked on both sides.
CHAT_SAMPLES: Final[list[tuple[str, Message[Chat, Any], str]]] = [
    ("chunk", Chat.chunk({"chunk": "Hello, how can I help?"}),
     '{"chunk":"Hello, how can I help?"}'),
    ("reasoning-chunk", Chat.reasoning({"chunk": "Let me think"}), '{"chunk":"Let me think"}'),
    ("reasoning-done", Chat.reasoning({"done": True}), '{"done":true}'),
    ("progress-steps", Chat.progress({"steps": [STEP]}),
     '{"steps":[{"id":"s1","label":"Searching the web","status":"active","toolName":"search"}]}'),
    ("progress-done", Chat.progress({"done": True}), '{"done":true}'),
    ("progress-chunk", Chat.progress({"chunk": "Reading 3 pages"}), '{"chunk":"Reading 3 pages"}'),
    ("clear", Chat.clear({}), "{}"),
    ("message_start", Chat.message_start({"userMessageId": "u1", "assistantMessageId": "a1",
                                          "model": MODEL}),
     '{"userMessageId":"u1","assistantMessageId":"a1",'
     '"model":{"id":"claude-x","displayName":"Claude X","provider":"anthropic"}}'),
    ("usage", Chat.usage({"inputTokens": 12, "outputTokens": 30, "totalTokens": 42}),
     '{"inputTokens":12,"outputTokens":30,"totalTokens":42}'),
    ("sources", Chat.sources([{"url": "https://example.org/a", "title": "A"},
                              {"url": "https://example.org/b", "title": "B", "snippet": "b..."}]),
     '[{"url":"https://example.org/a","title":"A"},'
     '{"url":"https://example.org/b","title":"B","snippet":"b..."}]'),
    ("suggestions", Chat.suggestions(["Tell me more", "Why?"]), '["Tell me more","Why?"]'),
    ("attachments", Chat.attachments([{"id": "f1", "filename": "a.txt", "mimeType": "text/plain",
                                       "dataUrl": "data:text/plain;base64,aGk=", "size": 2}]),
     '[{"id":"f1","filename":"a.txt","mimeType":"text/plain",'
     '"dataUrl":"data:text/plain;base64,aGk=","size":2}]'),
    ("title", Chat.title({"title": "Trip to Lisbon"}), '{"title":"Trip to Lisbon"}'),
    ("warnings", Chat.warnings(["Search quota low"]), '["Search quota low"]'),
    ("compression-start", Chat.compression({"messageCount": 40}), '{"messageCount":40}'),
    ("compression-done", Chat.compression({"done": True}), '{"done":true}'),
    ("selection_required", Chat.selection_required({
        "selectionId": "sel1", "prompt": "Which city?",
        "options": [{"id": "o1", "label": "Lisbon"}, {"id": "o2", "label": "Porto"}]}),
     '{"selectionId":"sel1","prompt":"Which city?",'
     '"options":[{"id":"o1","label":"Lisbon"},{"id":"o2","label":"Porto"}]}'),
    ("done", Chat.done({"done": True, "messageId": "a1", "userMessageId": "u1",
                        "reason": "complete"}),
     '{"done":true,"messageId":"a1","userMessageId":"u1","reason":"complete"}'),
    ("error", Chat.error({"error": "boom", "message": "boom"}),
     '{"error":"boom","message":"boom"}'),
]
SAMPLE_IDS: Final = [case[0] for case in CHAT_SAMPLES]


@final
class Invoice(TypedDict):
    id: str
    cents: int


class Billing(Contract):
    invoice: Event[Invoice] = Event("billing.invoice")


class MyChat(Chat):
    invoice: Event[Invoice] = Event()
