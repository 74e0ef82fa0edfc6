from __future__ import annotations

import os

import pytest

#: In CI every test must run: a missing service is a failure, not a skip.
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def require(available: bool, why: str) -> None:
    """Skip (outside CI) or fail (in CI) when a service the test needs is missing."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{why} (CI never skips this test)")
    pytest.skip(why)
