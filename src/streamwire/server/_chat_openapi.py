"""The ``/api/chat`` routes in the OpenAPI document (``_chat``'s routes)."""

from __future__ import annotations

from typing import Any

from ._openapi import NOT_JSON

__all__ = ["chat_openapi_paths"]


def chat_openapi_paths(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the ``/api/chat`` routes added."""
    errors = {"400": {"$ref": "#/components/responses/BadRequest"},
              "401": {"$ref": "#/components/responses/Refused"},
              "403": {"$ref": "#/components/responses/Refused"}}
    chat_id = [{"name": "chat_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    stream = {"description": "The reply as the AI SDK's UI message stream (`data: {json}` "
                             "events with ids, then `data: [DONE]`).",
              "headers": {"x-vercel-ai-ui-message-stream": {"schema": {"const": "v1"}}},
              "content": {"text/event-stream": {"schema": {"type": "string"}}}}
    message = {"type": "object", "required": ["role"], "properties": {
        "id": {"type": "string"}, "role": {"type": "string"},
        "parts": {"type": "array", "items": {"type": "object"}}}}
    paths: dict[str, Any] = {
        "/api/chat": {"post": {
            "summary": "Start the chat agent's reply to the last user message (once per chat, "
                       "user message and text) and stream it (useChat's DefaultChatTransport). "
                       "A body whose last message is a paused reply's assistant message with "
                       "answered tool parts (after addToolApprovalResponse or addToolOutput) "
                       "resumes that run once and streams the continuation.",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["id", "messages"],
                "properties": {"id": {"type": "string"},
                               "messages": {"type": "array", "items": message},
                               "trigger": {"enum": ["submit-message", "regenerate-message"]},
                               "messageId": {"type": ["string", "null"]},
                               "agent": {"type": "string", "description": "one of the server's "
                                         "chat agents (400 names them); default: the first"}},
                "additionalProperties": True}}}},
            "responses": {"200": stream, **errors, "415": NOT_JSON,
                          "404": {"$ref": "#/components/responses/NotFound"},
                          "409": {"$ref": "#/components/responses/Conflict"},
                          "413": {"$ref": "#/components/responses/TooLarge"},
                          "422": {"$ref": "#/components/responses/Invalid"}}}},
        "/api/chat/{chat_id}/stream": {"get": {
            "summary": "Resume the chat's running reply (useChat's reconnectToStream): from its "
                       "start, or after Last-Event-ID.",
            "parameters": [*chat_id, {"name": "Last-Event-ID", "in": "header", "required": False,
                                      "schema": {"type": "string"}}],
            "responses": {"200": stream, "204": {"description": "No reply is running."},
                          **errors}}},
        "/api/chat/{chat_id}/stop": {"post": {
            "summary": "Stop the chat's reply (its run ends interrupted); answers the run's "
                       "status.",
            "parameters": chat_id,
            "requestBody": {"required": False, "content": {"application/json": {"schema": {
                "type": "object", "properties": {"runId": {"type": "string"}}}}}},
            "responses": {"200": {"description": "The run's status.", "content": {
                "application/json": {"schema": {"type": "object"}}}},
                **errors, "404": {"$ref": "#/components/responses/NotFound"}, "415": NOT_JSON,
                "409": {"$ref": "#/components/responses/Conflict"}}}},
    }
    return {**document, "paths": {**document["paths"], **paths}}
