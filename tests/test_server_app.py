"""``create_app``'s options as a user meets them: write protection by default, over real uvicorn."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from helpers.chaos_proxy import ServerThread
from helpers.server import LogFactory, backend, serving
from streamwire.errors import UsageError
from streamwire.log import MAX_LIST_LIMIT, StreamLog
from streamwire.log.memory import MemoryLog
from streamwire.server import bearer_token, create_app

__all__ = ["backend"]  # a fixture, used by name


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


def test_the_api_page_is_served_at_docs() -> None:
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


# ---- the HTTP API explains itself -------------------------------------------------------------


class LegacyMemoryLog:
    """A third-party log written before ``StreamLog.list_streams`` (and ``LogCapabilities``): a
    ``MemoryLog``'s methods but those."""

    def __init__(self) -> None:
        self._log = MemoryLog()

    def __getattr__(self, name: str) -> Any:
        if name in ("list_streams", "capabilities"):
            raise AttributeError(name)
        return getattr(self._log, name)


def test_a_wrong_end_status_names_the_field_and_the_valid_values() -> None:
    with ServerThread(create_app(MemoryLog(), allow_anonymous_writes=True)) as server, \
            httpx.Client(base_url=server.url) as client:
        client.put("/streams/v")
        wrong = client.post("/streams/v/end", json={"status": "complete"})
        assert wrong.status_code == 422
        assert wrong.json()["error"].startswith(
            "`status` must be one of `completed`, `paused`, `interrupted`")
        missing = client.post("/streams/v/fail", json={"error": "x"})
        assert missing.json()["error"].startswith(
            "`recoverable` is missing: it is required and must be true or false")
        extra = client.post("/streams/v/end", json={"status": "completed", "reason": "x"})
        assert "its fields are `status`, `output`, `state`, `usage`" in extra.json()["error"]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_409_names_the_http_routes_that_fix_it(backend: str, tmp_path: Path) -> None:
    from streamwire.log.sqlite import SQLiteLog

    log = MemoryLog() if backend == "memory" else SQLiteLog(tmp_path / "s.db")
    with ServerThread(create_app(log, allow_anonymous_writes=True)) as server, \
            httpx.Client(base_url=server.url) as client:
        client.put("/streams/done")
        client.post("/streams/done/end", json={"status": "completed"})
        refused = client.post("/streams/done/chunks", json=[{"step": 0, "chunk": 1}])
        assert refused.status_code == 409
        message = refused.json()["error"]
        assert message == ("stream 'done' is completed, not active: POST "
                           "/streams/done/reactivate makes it active again with its chunks, "
                           "POST /streams/done/reset starts a new run")
        assert client.post("/streams/done/reactivate").status_code == 200
        assert client.post("/streams/done/chunks",
                           json=[{"step": 0, "chunk": 1}]).status_code == 200


def test_get_streams_lists_in_pages_and_is_authorized_as_a_read() -> None:
    log = MemoryLog()
    app = create_app(log, authorize=bearer_token("t", protect_reads=True))
    auth = {"Authorization": "Bearer t"}
    with ServerThread(app) as server, httpx.Client(base_url=server.url) as client:
        for sid in ("e", "a", "d", "c", "b"):
            assert client.put(f"/streams/{sid}", headers=auth).status_code == 200
        assert client.get("/streams").status_code == 401
        seen: list[str] = []
        after = ""
        while True:
            page = client.get("/streams", params={"limit": 2, "after": after}, headers=auth).json()
            seen += [info["streamId"] for info in page["streams"]]
            assert all(info["status"] == "active" for info in page["streams"])
            if page["next"] is None:
                break
            after = page["next"]
        assert seen == ["a", "b", "c", "d", "e"]
        bad = client.get("/streams", params={"limit": 0}, headers=auth)
        assert bad.status_code == 400
        assert "limit must be an integer from 1 to 1000" in bad.json()["error"]


def test_get_streams_on_a_log_that_cannot_list_says_so() -> None:
    legacy = cast(StreamLog, LegacyMemoryLog())
    with ServerThread(create_app(legacy, token="t")) as server, \
            httpx.Client(base_url=server.url) as client:
        answer = client.get("/streams")
        assert answer.status_code == 501
        assert "MemoryLog" in answer.json()["error"]


def _page_ids(client: httpx.Client, limit: int, **headers: str) -> tuple[list[list[str]], int]:
    """Every page of ``GET /streams?limit=``, following ``next``; and how many requests it took."""
    pages: list[list[str]] = []
    after = ""
    requests = 0
    while True:
        answer = client.get("/streams", params={"limit": limit, "after": after}, headers=headers)
        requests += 1
        assert answer.status_code == 200, answer.text
        body = answer.json()
        pages.append([info["streamId"] for info in body["streams"]])
        if body["next"] is None:
            return pages, requests
        assert body["next"] == pages[-1][-1]
        after = body["next"]


def test_get_streams_pages_through_the_streams_of_every_backend(backend: LogFactory) -> None:
    """Memory, SQLite and Redis behind real uvicorn: pages in id order (bytes, not numbers or
    case-folded), ``next`` until the last page, infos as ``GET /info`` gives them."""
    ids = ["run-10", "run-2", "run-1", "chat-b", "chat-a", "z", "A", "run-3"]
    with serving(backend, token="t") as srv, httpx.Client(base_url=srv.base) as client:
        auth = {"Authorization": "Bearer t"}
        for sid in ids:
            assert client.put(f"/streams/{sid}", headers=auth).status_code == 200
        assert client.post("/streams/chat-a/end", json={"status": "completed"},
                           headers=auth).status_code == 200
        pages, requests = _page_ids(client, 3)
        assert pages == [["A", "chat-a", "chat-b"], ["run-1", "run-10", "run-2"], ["run-3", "z"]]
        assert requests == 3
        assert _page_ids(client, 4)[0] == [["A", "chat-a", "chat-b", "run-1"],
                                           ["run-10", "run-2", "run-3", "z"]]
        assert _page_ids(client, MAX_LIST_LIMIT)[0] == [sorted(ids)]
        listed = client.get("/streams", params={"after": "chat-", "limit": 1}).json()
        assert listed["streams"] == [client.get("/streams/chat-a/info").json()]
        assert listed["streams"][0]["status"] == "completed"
        assert listed["next"] == "chat-a"


def test_get_streams_at_the_maximum_limit_still_says_whether_more_follow() -> None:
    log = MemoryLog()
    ids = [f"s{n:04d}" for n in range(MAX_LIST_LIMIT + 1)]

    async def create() -> None:
        for sid in ids:
            await log.create_stream(sid)

    asyncio.run(create())
    with ServerThread(create_app(log, token="t")) as server, \
            httpx.Client(base_url=server.url) as client:
        first = client.get("/streams", params={"limit": MAX_LIST_LIMIT}).json()
        assert [info["streamId"] for info in first["streams"]] == ids[:MAX_LIST_LIMIT]
        assert first["next"] == ids[MAX_LIST_LIMIT - 1]
        last = client.get("/streams", params={"limit": MAX_LIST_LIMIT,
                                              "after": first["next"]}).json()
        assert ([info["streamId"] for info in last["streams"]], last["next"]) == ([ids[-1]], None)
        exactly = client.get("/streams", params={"limit": MAX_LIST_LIMIT, "after": ids[0]}).json()
        assert len(exactly["streams"]) == MAX_LIST_LIMIT
        assert exactly["next"] is None  # a full page at the maximum, and nothing after it


def test_every_documented_body_example_is_accepted_by_its_route() -> None:
    with ServerThread(create_app(MemoryLog(), allow_anonymous_writes=True)) as server, \
            httpx.Client(base_url=server.url) as client:
        doc = client.get("/openapi.json").json()
        tried = []
        for route in ("chunks", "cleanup", "end", "fail"):  # the order a producer uses them
            sid = f"ex-{route}"
            client.put(f"/streams/{sid}")
            client.post(f"/streams/{sid}/chunks", json=[{"step": 1, "chunk": 0}])
            op = doc["paths"][f"/streams/{{stream_id}}/{route}"]["post"]
            example = op["requestBody"]["content"]["application/json"]["example"]
            answer = client.post(f"/streams/{sid}/{route}", json=example)
            assert answer.status_code == 200, (route, answer.text)
            tried.append(route)
        assert tried == ["chunks", "cleanup", "end", "fail"]
