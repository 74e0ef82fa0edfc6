"""Idempotent producers: the rule every backend applies atomically with the write it guards (the
scheme of Kafka's idempotent producer and of Durable Streams' ``Producer-Id`` / ``-Epoch`` /
``-Seq``). No I/O here: memory and SQLite call ``admit`` and ``record`` inside the write;
``RedisLog`` runs the same rule in Lua inside its write scripts (``_PRODUCER`` in
``streamwire.log.redis._scripts``: a script is the only place Redis can check and write
atomically), and the contract suite holds every backend to it.

Per stream and producer id the log keeps the producer's newest epoch, the last ``seq`` it applied
and the results of its last ``MAX_PRODUCER_BATCHES`` requests (``seq``, first sequence, count).
"""

from __future__ import annotations

from typing import Final, final

from ..errors import ProducerEpochError, ProducerSequenceError, UsageError
from . import Producer
from ._common import MAX_SAFE_INTEGER

__all__ = [
    "MAX_PRODUCER_BATCHES",
    "MAX_PRODUCER_ID",
    "ProducerState",
    "admit",
    "check_producer",
    "epoch_error",
    "record",
    "sequence_error",
]

#: Requests per producer whose result a repeat is answered with (Kafka keeps 5 batches too).
MAX_PRODUCER_BATCHES: Final = 5
#: Characters of a producer id at most.
MAX_PRODUCER_ID: Final = 256


@final
class ProducerState:
    """One producer's state on one stream: ``recent`` holds ``(seq, first, count)``, oldest
    first. ``text()`` / ``parse()`` give the form SQLite stores (and Redis's scripts write)."""

    __slots__ = ("epoch", "last_seq", "recent")

    def __init__(self, epoch: int, last_seq: int, recent: list[tuple[int, int, int]]) -> None:
        self.epoch = epoch
        self.last_seq = last_seq
        self.recent = recent

    def text(self) -> str:
        """``"<epoch> <last seq> <seq>:<first>:<count> ..."``."""
        return " ".join([str(self.epoch), str(self.last_seq),
                         *[f"{s}:{f}:{c}" for s, f, c in self.recent]])

    @classmethod
    def parse(cls, text: str) -> ProducerState:
        epoch, last, *recent = text.split()
        triples = [tuple(int(x) for x in item.split(":")) for item in recent]
        return cls(int(epoch), int(last), [(t[0], t[1], t[2]) for t in triples])


def check_producer(producer: object) -> Producer:
    """A ``Producer`` with a usable id and exact ints, or ``UsageError``."""
    if not isinstance(producer, Producer):
        raise UsageError(f"producer must be a streamwire.log.Producer, not {producer!r}")
    pid = producer.id
    if type(pid) is not str or not pid or len(pid) > MAX_PRODUCER_ID:
        raise UsageError(f"a producer id is a non-empty str of at most {MAX_PRODUCER_ID} "
                         f"characters, not {pid!r}")
    for name, value in (("epoch", producer.epoch), ("seq", producer.seq)):
        if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
            raise UsageError(f"a producer {name} is an int in 0..2**53 - 1, not {value!r}")
    return producer


def epoch_error(pid: str, current: int, received: int) -> ProducerEpochError:
    """The error for a request on an epoch older than the stream's ``current`` one."""
    return ProducerEpochError(
        f"producer {pid!r} wrote with epoch {received}, but the stream has seen epoch "
        f"{current} from it: a newer instance took over; this one must stop",
        producer_id=pid, current=current, received=received)


def sequence_error(pid: str, expected: int, received: int, why: str) -> ProducerSequenceError:
    """The error for a seq that is not the next one; ``why``: ``epoch`` (a new epoch not starting
    at 0), ``old`` (a repeat older than the remembered requests) or ``gap``."""
    if why == "epoch":
        text = f"producer {pid!r} starts a new epoch at seq {received}; a new epoch starts at 0"
    elif why == "old":
        text = (f"producer {pid!r} repeats seq {received}, which was applied but is older than "
                f"the last {MAX_PRODUCER_BATCHES} requests the log remembers; the next seq is "
                f"{expected}")
    else:
        text = (f"producer {pid!r} sent seq {received} but the next one is {expected}: an "
                "earlier request is missing or came out of order; nothing was stored")
    return ProducerSequenceError(text, producer_id=pid, expected=expected, received=received)


def admit(state: ProducerState | None, producer: Producer) -> tuple[int, int] | None:
    """None when the request is new (apply it, then ``record`` it); ``(first, count)`` when it
    repeats a remembered one (answer with that, store nothing). Raises ``ProducerEpochError`` for
    an older epoch and ``ProducerSequenceError`` for a seq that is not the next one."""
    pid, epoch, seq = producer.id, producer.epoch, producer.seq
    if state is not None and epoch < state.epoch:
        raise epoch_error(pid, state.epoch, epoch)
    if state is None or epoch > state.epoch:
        if seq != 0:
            raise sequence_error(pid, 0, seq, "epoch")
        return None
    expected = state.last_seq + 1
    if seq == expected:
        return None
    if seq < expected:
        for done, first, count in state.recent:
            if done == seq:
                return first, count
        raise sequence_error(pid, expected, seq, "old")
    raise sequence_error(pid, expected, seq, "gap")


def record(state: ProducerState | None, producer: Producer, first: int,
           count: int) -> ProducerState:
    """The producer's state once its new request got sequences ``first..first + count - 1``."""
    if state is None or producer.epoch != state.epoch:
        return ProducerState(producer.epoch, producer.seq, [(producer.seq, first, count)])
    state.last_seq = producer.seq
    state.recent.append((producer.seq, first, count))
    if len(state.recent) > MAX_PRODUCER_BATCHES:
        del state.recent[0]
    return state
