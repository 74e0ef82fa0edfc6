"""``create_app``'s options as a user meets them: write protection by default, over real uvicorn."""

from __future__ import annotations

import httpx
import pytest

from helpers.chaos_proxy import ServerThread
from streamwire.errors import UsageError
from streamwire.log.memory import MemoryLog
from streamwire.server import bearer_token, create_app


def test_writes_are_never_open_by_omission() -> None:
    with pytest.raises(UsageError) as refused:
        create_app(MemoryLog())
    message = str(refused.value)
    for option in ("authorize=", "token=", "allow_anonymous_writes=True"):
        assert option in message


def test_two_write_choices_are_refused() -> None:
    with pytest.raises(UsageError, match="only one of token, allow_anonymous_writes"):
        create_app(MemoryLog(), token="t", allow_anonymous_writes=True)
    with pytest.raises(UsageError, match="only one of authorize, token"):
        create_app(MemoryLog(), authorize=bearer_token("a"), token="t")
    with pytest.raises(UsageError, match="must not be empty"):
        create_app(MemoryLog(), token="")


def test_a_token_protects_writes_and_leaves_reads_open() -> None:
    with ServerThread(create_app(MemoryLog(), token="s3cret")) as server, \
            httpx.Client(base_url=server.url) as client:
        missing = client.put("/streams/a")
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert client.put("/streams/a", headers={"Authorization": "Bearer nope"}).status_code == 403
        assert client.put("/streams/a", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert client.get("/streams/a/info").status_code == 200


def test_anonymous_writes_when_asked_for() -> None:
    with ServerThread(create_app(MemoryLog(), allow_anonymous_writes=True)) as server, \
            httpx.Client(base_url=server.url) as client:
        assert client.put("/streams/b").status_code == 200
        assert client.post("/streams/b/chunks", json=[{"step": 0, "chunk": 1}]).json() == {
            "sequences": [1]}


def test_swagger_ui_is_served_at_docs() -> None:
    with ServerThread(create_app(MemoryLog(), token="t")) as server, \
            httpx.Client(base_url=server.url) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert '"/openapi.json"' in page.text
        assert client.get("/openapi.json").json()["paths"]["/docs"]["get"]


def test_a_wrong_method_is_405_with_allow_and_an_unknown_path_404() -> None:
    with ServerThread(create_app(MemoryLog(), token="t")) as server, \
            httpx.Client(base_url=server.url) as client:
        wrong = client.delete("/streams/a/chunks")
        assert wrong.status_code == 405
        assert wrong.headers["allow"] == "POST"
        assert wrong.json() == {"status": 405, "error": "DELETE /streams/a/chunks: this route "
                                "allows POST (the API: GET /openapi.json)"}
        unknown = client.get("/streams/a/b/c")
        assert unknown.status_code == 404
        assert "no such route" in unknown.json()["error"]
