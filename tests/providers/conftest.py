"""The replay server (``helpers.provider_replay``) serving ``fixtures/``, one per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers.provider_replay import ReplayServer
from providers.relayed import FIXTURES


@pytest.fixture(scope="module")
def replay() -> Iterator[ReplayServer]:
    with ReplayServer(FIXTURES) as server:
        yield server
