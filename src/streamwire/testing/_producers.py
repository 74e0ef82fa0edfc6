"""The contract's cases for idempotent producers (``producer=Producer(id, epoch, seq)``) and for
integers a JavaScript reader holds exactly."""

from __future__ import annotations

import pytest

from ..errors import ProducerEpochError, ProducerSequenceError, StreamStateError, UsageError
from ..frames import CaughtUpFrame, EndFrame
from ..log import Producer, StreamLog
from ._helpers import assert_one_terminal_last, chunk_of, chunk_seqs, read_all

__all__ = ["ProducerContract"]

_MAX = 2**53 - 1


class ProducerContract:
    """A retried request is stored once and answered with its original result; a gap, a
    reordering and a zombie epoch are typed errors; nothing else changes for other writers."""

    async def test_a_retried_batch_is_stored_once_with_its_sequences(self, log: StreamLog) -> None:
        await log.create_stream("s")
        first = Producer("writer", 0, 0)
        assert await log.append_many("s", [(0, b"1"), (0, b"2")], producer=first) == [1, 2]
        # the reply was lost: the writer sends the same request again
        assert await log.append_many("s", [(0, b"1"), (0, b"2")], producer=first) == [1, 2]
        assert await log.append("s", 0, b"3", producer=Producer("writer", 0, 1)) == 3
        assert await log.append("s", 0, b"3", producer=Producer("writer", 0, 1)) == 3
        assert await log.append_many("s", [(0, b"1"), (0, b"2")], producer=first) == [1, 2]
        assert (await log.info("s")).head == 3
        await log.end_stream("s")
        assert chunk_seqs(await read_all(log, "s")) == [1, 2, 3]

    async def test_seq_1_before_seq_0_is_refused_and_stores_nothing(self, log: StreamLog) -> None:
        await log.create_stream("s")
        with pytest.raises(ProducerSequenceError) as caught:
            await log.append("s", 0, b"1", producer=Producer("w", 0, 1))
        assert (caught.value.expected, caught.value.received) == (0, 1)
        assert caught.value.status_hint == 409
        assert (await log.info("s")).head == 0
        assert await log.append("s", 0, b"1", producer=Producer("w", 0, 0)) == 1
        with pytest.raises(ProducerSequenceError) as caught:
            await log.append_many("s", [(0, b"3")], producer=Producer("w", 0, 2))
        assert (caught.value.expected, caught.value.received) == (1, 2)
        assert await log.append("s", 0, b"2", producer=Producer("w", 0, 1)) == 2
        assert await log.append("s", 0, b"3", producer=Producer("w", 0, 2)) == 3

    async def test_a_zombie_on_an_old_epoch_is_fenced_off(self, log: StreamLog) -> None:
        await log.create_stream("s")
        assert await log.append("s", 0, b"1", producer=Producer("w", 0, 0)) == 1
        assert await log.append("s", 0, b"2", producer=Producer("w", 1, 0)) == 2  # took over
        with pytest.raises(ProducerEpochError) as caught:
            await log.append("s", 0, b"9", producer=Producer("w", 0, 1))
        assert (caught.value.current, caught.value.received) == (1, 0)
        assert caught.value.status_hint == 403
        with pytest.raises(ProducerEpochError):
            await log.end_stream("s", producer=Producer("w", 0, 1))
        with pytest.raises(ProducerSequenceError):  # a new epoch starts at seq 0
            await log.append("s", 0, b"9", producer=Producer("w", 2, 1))
        info = await log.info("s")
        assert (info.head, info.status) == (2, "active")

    async def test_a_duplicate_final_request_ends_the_stream_once(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await log.append("s", 0, b"1", producer=Producer("w", 0, 0))
        await log.end_stream("s", output={"n": 1}, producer=Producer("w", 0, 1))
        await log.end_stream("s", output={"n": 1}, producer=Producer("w", 0, 1))  # retried
        assert await log.append("s", 0, b"1", producer=Producer("w", 0, 0)) == 1
        with pytest.raises(StreamStateError):  # a new request on a finished stream
            await log.end_stream("s", producer=Producer("w", 0, 2))
        with pytest.raises(StreamStateError):  # and a caller that names no producer
            await log.end_stream("s")
        frames = await read_all(log, "s")
        assert frames == [frames[0], CaughtUpFrame(1), EndFrame("completed", output={"n": 1})]
        assert_one_terminal_last(frames)

    async def test_a_retried_fail_is_a_no_op(self, log: StreamLog) -> None:
        await log.create_stream("s")
        await log.fail_stream("s", "boom", producer=Producer("w", 3, 0))
        await log.fail_stream("s", "boom", producer=Producer("w", 3, 0))
        info = await log.info("s")
        assert (info.status, info.error) == ("failed", "boom")

    async def test_only_the_last_five_requests_are_remembered(self, log: StreamLog) -> None:
        await log.create_stream("s")
        for seq in range(7):
            await log.append("s", 0, chunk_of(seq), producer=Producer("w", 0, seq))
        for seq in range(2, 7):
            assert await log.append("s", 0, chunk_of(seq),
                                    producer=Producer("w", 0, seq)) == seq + 1
        with pytest.raises(ProducerSequenceError) as caught:
            await log.append("s", 0, chunk_of(1), producer=Producer("w", 0, 1))
        assert (caught.value.expected, caught.value.received) == (7, 1)
        assert (await log.info("s")).head == 7

    async def test_producers_are_independent_of_each_other_and_of_plain_writes(
            self, log: StreamLog) -> None:
        await log.create_stream("s")
        assert await log.append("s", 0, b"1", producer=Producer("a", 0, 0)) == 1
        assert await log.append("s", 0, b"2") == 2
        assert await log.append("s", 0, b"3", producer=Producer("b", 5, 0)) == 3
        assert await log.append_many("s", [], producer=Producer("a", 0, 1)) == []
        assert await log.append("s", 0, b"4", producer=Producer("a", 0, 2)) == 4
        assert await log.append("s", 0, b"2") == 5  # unchecked: stored again
        await log.reset_stream("s")  # producer state outlives a new run
        assert await log.append("s", 0, b"6", producer=Producer("a", 0, 2)) == 4
        assert await log.append("s", 0, b"6", producer=Producer("a", 0, 3)) == 6

    async def test_bad_producers_are_usage_errors(self, log: StreamLog) -> None:
        await log.create_stream("s")
        for bad in (Producer("", 0, 0), Producer("x" * 257, 0, 0), Producer("w", -1, 0),
                    Producer("w", 0, _MAX + 1), Producer("w", True, 0), ("w", 0, 0)):
            with pytest.raises(UsageError):
                await log.append("s", 0, b"1", producer=bad)  # type: ignore[arg-type]
        assert await log.append("s", 0, b"1", producer=Producer("w", _MAX, 0)) == 1
        assert await log.append("s", 0, b"2", producer=Producer("w", _MAX, 1)) == 2

    async def test_integers_above_2_53_minus_1_are_refused(self, log: StreamLog) -> None:
        await log.create_stream("s")
        for step in (_MAX + 1, 2**63, 2**64):
            with pytest.raises(UsageError):
                await log.append("s", step, b"1")
            with pytest.raises(UsageError):
                await log.append_many("s", [(0, b"1"), (step, b"2")])
            with pytest.raises(UsageError):
                await log.cleanup_to_step("s", step)
            with pytest.raises(UsageError):
                await read_all(log, "s", step)
        assert (await log.info("s")).head == 0
        assert await log.append("s", _MAX, b"1") == 1
        assert await log.append("s", _MAX - 1, b"2") == 2
        rewound = await log.cleanup_to_step("s", _MAX - 1)  # removes the chunk at step _MAX
        assert (rewound.at_step, rewound.min_sequence) == (_MAX - 1, 0)
        await log.end_stream("s")
        assert chunk_seqs(await read_all(log, "s", 1)) == [2]
