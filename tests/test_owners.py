"""The ownership rule's lookups (``server._owners.Owners``): a settled answer is reused for
``OWNER_CACHE_SECONDS`` (a storm of readers of one stream asks the run store once), and one that
may still change (nothing there yet) never is, so a run started a moment after a miss is hidden
from other users at once."""

from __future__ import annotations

import pytest

from streamwire.errors import StreamNotFoundError
from streamwire.log.memory import MemoryLog
from streamwire.runs import MemoryRunStore, RunRecord
from streamwire.runs._record import new_record
from streamwire.server._auth import User
from streamwire.server._owners import Owners

pytestmark = pytest.mark.anyio

ALICE, BOB = User("alice"), User("bob")


class CountingStore(MemoryRunStore):
    """A run store that counts its reads."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get(self, run_id: str) -> RunRecord | None:
        self.gets += 1
        return await super().get(run_id)


async def start(store: CountingStore, log: MemoryLog, run_id: str, user: str | None) -> None:
    await log.create_stream(run_id)
    await store.insert(new_record(run_id, "agent", None, owner="w", now=0.0, lease=30.0,
                                  user=user))


async def test_a_storm_of_readers_asks_the_store_once_per_stream() -> None:
    log, store = MemoryLog(), CountingStore()
    owners = Owners(log, store)
    await log.create_stream("plain")
    await start(store, log, "run-a", "alice")
    for _ in range(500):
        await owners.check_stream(None, "plain")
        await owners.check_stream(ALICE, "run-a")
    assert store.gets == 2
    with pytest.raises(StreamNotFoundError):  # the cached owner still rules
        await owners.check_stream(BOB, "run-a")
    assert store.gets == 2


async def test_nothing_there_yet_is_never_cached() -> None:
    log, store = MemoryLog(), CountingStore()
    owners = Owners(log, store)
    # Bob looks first: no stream, no run (and no chat) yet
    for stream_id in ("later", "chat:c1", "chat:c1:k1"):
        await owners.check_stream(BOB, stream_id)
    # then Alice starts a run under that id, and a chat reply: Bob is refused at once
    await start(store, log, "later", "alice")
    await start(store, log, "chat:c1:k1", "alice")
    for stream_id in ("later", "chat:c1:k1"):
        with pytest.raises(StreamNotFoundError):
            await owners.check_stream(BOB, stream_id)
    await owners.check_stream(ALICE, "later")
