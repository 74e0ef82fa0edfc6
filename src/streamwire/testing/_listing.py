"""The contract's cases for ``list_streams``: id order, paging, what is never listed, its limits."""

from __future__ import annotations

import random

import anyio
import pytest

from ..errors import UsageError
from ..log import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, StreamInfo, StreamLog
from ._helpers import LogFactory, fill

__all__ = ["ListingContract"]

#: Ids whose codepoint order (= UTF-8 byte order) differs from case-folded, UTF-16 and length
#: order: a backend that sorts any other way lists them in another order.
_IDS = ("a", "B", "b", "a0", "a-1", "aa", "z", "\u00e9", "\uff21", "\U0001f600", "\u65e5\u672c",
        "run:1", "run:10", "run:2")


async def _page_through(log: StreamLog, limit: int) -> list[list[str]]:
    """Every page of ids ``list_streams`` gives at ``limit`` per page, following ``after=``."""
    pages: list[list[str]] = []
    after = ""
    while True:
        page = [info.stream_id for info in await log.list_streams(after=after, limit=limit)]
        assert len(page) <= limit
        if not page:
            return pages
        pages.append(page)
        after = page[-1]


class ListingContract:
    """``list_streams``: id order (codepoint order) on every backend, paging with ``after=``,
    deleted and expired streams never listed, ``limit`` in ``1..MAX_LIST_LIMIT``."""

    async def test_streams_are_listed_in_codepoint_order(self, log: StreamLog) -> None:
        assert await log.list_streams() == []
        shuffled = list(_IDS)
        random.shuffle(shuffled)
        for sid in shuffled:
            await log.create_stream(sid)
        listed = await log.list_streams()
        assert [info.stream_id for info in listed] == sorted(_IDS)  # Python's str order
        assert sorted(_IDS) == sorted(_IDS, key=lambda sid: sid.encode())  # = UTF-8 byte order
        assert all(isinstance(info, StreamInfo) for info in listed)

    async def test_paging_with_after_lists_every_stream_once(self, log: StreamLog) -> None:
        for sid in _IDS:
            await log.create_stream(sid)
        everything = sorted(_IDS)
        for limit in (1, 3, len(_IDS), MAX_LIST_LIMIT):
            got = await _page_through(log, limit)
            assert [sid for page in got for sid in page] == everything, limit
            assert all(len(page) == limit for page in got[:-1])
        # after= need not name a stream: the page starts at the next id above it
        assert [i.stream_id for i in await log.list_streams(after="a.", limit=2)] == ["a0", "aa"]
        assert await log.list_streams(after=everything[-1]) == []

    async def test_listed_infos_are_the_streams_infos(self, log: StreamLog) -> None:
        await log.create_stream("done")
        await fill(log, "done", [0, 1])
        await log.end_stream("done", "paused", output={"o": 1}, state=[1])
        await log.create_stream("failed")
        await log.fail_stream("failed", "boom", error_detail={"code": "X"}, recoverable=True)
        await log.create_stream("live")
        await fill(log, "live", [0])
        await log.cleanup_to_step("live", 0)
        listed = await log.list_streams()
        assert listed == [await log.info(sid) for sid in ("done", "failed", "live")]
        assert [info.status for info in listed] == ["paused", "failed", "active"]

    async def test_deleted_streams_are_not_listed(self, log: StreamLog) -> None:
        for sid in ("a", "b", "c"):
            await log.create_stream(sid)
        await log.delete_stream("b")
        assert [i.stream_id for i in await log.list_streams()] == ["a", "c"]
        assert await _page_through(log, 1) == [["a"], ["c"]]
        await log.create_stream("b")  # a new incarnation is listed again
        assert [i.stream_id for i in await log.list_streams()] == ["a", "b", "c"]

    async def test_expired_streams_are_not_listed(self, make_log: LogFactory) -> None:
        log = await make_log(finished_ttl=0.3)
        for sid in ("a", "b", "c", "d"):
            await log.create_stream(sid)
        await log.end_stream("b")
        await log.fail_stream("c", "boom")
        await log.end_stream("d")
        await log.reactivate_stream("d")  # active again: it no longer expires
        assert [i.stream_id for i in await log.list_streams()] == ["a", "b", "c", "d"]
        await anyio.sleep(1.2)
        assert [i.stream_id for i in await log.list_streams()] == ["a", "d"]
        assert await _page_through(log, 1) == [["a"], ["d"]]
        await log.create_stream("c")  # a new incarnation is listed again
        assert [i.stream_id for i in await log.list_streams()] == ["a", "c", "d"]

    async def test_limit_has_a_default_and_a_maximum(self, log: StreamLog) -> None:
        ids = [f"s{n:03d}" for n in range(DEFAULT_LIST_LIMIT + 1)]
        for sid in ids:
            await log.create_stream(sid)
        assert [i.stream_id for i in await log.list_streams()] == ids[:DEFAULT_LIST_LIMIT]
        assert len(await log.list_streams(limit=MAX_LIST_LIMIT)) == len(ids)
        refused = f"limit must be an int from 1 to {MAX_LIST_LIMIT}"
        for bad in (0, -1, MAX_LIST_LIMIT + 1, True, 2.0, "5", None):
            with pytest.raises(UsageError, match=refused):
                await log.list_streams(limit=bad)  # type: ignore[arg-type]
        for wrong in (None, 1, b"a"):
            with pytest.raises(UsageError, match="after must be a str"):
                await log.list_streams(after=wrong)  # type: ignore[arg-type]
