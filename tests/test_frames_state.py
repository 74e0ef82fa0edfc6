"""streamwire.frames.ResumeState: the reader side of wire v2 (dedup, gaps, rewound G4, terminals)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from streamwire.errors import (
    MalformedFrameError,
    StreamDropError,
    StreamFailedError,
    StreamGapError,
    StreamTruncatedError,
    StreamwireError,
    UsageError,
)
from streamwire.frames import (
    CaughtUpFrame,
    ChunkFrame,
    EndFrame,
    FailFrame,
    ResumeState,
    ResumeStatus,
    RewoundFrame,
    TruncatedFrame,
    UnknownFrame,
)


def chunk(seq: int) -> ChunkFrame:
    return ChunkFrame(seq, msgspec.Raw(b'{"n":%d}' % seq))


def feed(state: ResumeState, *seqs: int) -> list[int]:
    """Feed chunks; return the sequences handed to the consumer."""
    out: list[int] = []
    for seq in seqs:
        out += [f.sequence for f in state.receive(chunk(seq)) if isinstance(f, ChunkFrame)]
    return out


# -- dedup and gaps ------------------------------------------------------------------------------


def test_chunks_in_order_advance_the_cursor() -> None:
    state = ResumeState()
    assert feed(state, 1, 2, 3) == [1, 2, 3]
    assert state.cursor == 3
    assert state.status is ResumeStatus.STREAMING


def test_duplicates_are_dropped() -> None:
    state = ResumeState()
    assert feed(state, 1, 2, 2, 1, 3, 3) == [1, 2, 3]
    resumed = ResumeState(5)
    assert feed(resumed, 3, 4, 5, 6, 7) == [6, 7]


def test_a_gap_inside_a_connection_is_a_typed_retryable_error() -> None:
    state = ResumeState()
    feed(state, 1, 2)
    with pytest.raises(StreamGapError) as info:
        state.receive(chunk(4))
    error = info.value
    assert isinstance(error, MalformedFrameError)
    assert error.retryable
    assert (error.cursor, error.sequence) == (2, 4)
    assert "3..3 are missing" in str(error)
    assert state.cursor == 2
    with pytest.raises(StreamGapError) as again:  # sticky until reattach
        state.receive(chunk(3))
    assert again.value is error
    assert state.reattach() == 2
    assert feed(state, 3, 4) == [3, 4]


def test_the_first_chunk_after_an_attach_may_jump() -> None:
    # A reset run (or a cleanup's survivors) starts above the cursor: the server vouches for it.
    state = ResumeState()
    state.receive(CaughtUpFrame(50))
    assert feed(state, 51, 52) == [51, 52]
    with pytest.raises(StreamGapError):
        feed(state, 60)


def test_reattach_allows_the_next_first_chunk_to_jump() -> None:
    state = ResumeState(3)
    feed(state, 4)
    with pytest.raises(StreamDropError):
        state.eof()
    state.reattach()
    assert feed(state, 9, 10) == [9, 10]


# -- rewound while attached (the G4 cases) -------------------------------------------------------


def test_rewound_at_the_head_passes_through() -> None:
    state = ResumeState()
    feed(state, 1, 2, 3)
    marker = RewoundFrame(1, 3, 2)
    assert state.receive(marker) == [marker]
    assert feed(state, 4) == [4]


def test_rewound_without_at_sequence_has_no_debt() -> None:
    state = ResumeState()
    feed(state, 1)
    assert state.receive(RewoundFrame(0)) == [RewoundFrame(0)]
    assert feed(state, 2) == [2]


def test_behind_at_sequence_on_a_live_stream_raises_truncated() -> None:
    state = ResumeState()
    feed(state, 1, 2)
    state.receive(CaughtUpFrame(2))
    marker = RewoundFrame(1, 10, 5)
    assert state.receive(marker) == [marker]  # the consumer prunes first
    with pytest.raises(StreamTruncatedError) as info:
        state.receive(chunk(11))  # nothing between 3 and 10 can come: cannot make progress
    assert info.value.floor == 10
    assert info.value.error_detail == {"code": "TRUNCATED", "atStep": 1, "atSequence": 10}
    assert not info.value.retryable
    assert state.status is ResumeStatus.TRUNCATED


def test_survivors_drain_then_caught_up_raises_truncated() -> None:
    state = ResumeState(2)
    state.receive(RewoundFrame(1, 10, 5))  # arrives during the replay
    assert feed(state, 3, 4, 5) == [3, 4, 5]  # the survivors are still delivered
    with pytest.raises(StreamTruncatedError) as info:
        state.receive(CaughtUpFrame(10))
    assert info.value.floor == 10


def test_catching_up_to_at_sequence_clears_the_debt() -> None:
    state = ResumeState(8)
    state.receive(RewoundFrame(3, 10))
    assert feed(state, 9, 10) == [9, 10]
    state.receive(CaughtUpFrame(10))
    assert feed(state, 11) == [11]


@pytest.mark.parametrize(
    "terminal", [EndFrame("completed"), FailFrame("x", False), TruncatedFrame(0)],
    ids=["end", "fail", "truncated"])
def test_a_terminal_pre_empts_the_rewound_truncation(
        terminal: EndFrame | FailFrame | TruncatedFrame) -> None:
    state = ResumeState()
    feed(state, 1)
    state.receive(RewoundFrame(0, 10, 0))
    if isinstance(terminal, EndFrame):
        assert state.receive(terminal) == []
    else:
        expected = StreamFailedError if isinstance(terminal, FailFrame) else StreamTruncatedError
        with pytest.raises(expected) as info:
            state.receive(terminal)
        assert info.type is expected  # the terminal's own error, not the rewound's floor=10
        assert getattr(info.value, "floor", 0) == 0
    assert state.terminal == terminal


def test_the_rewound_debt_survives_a_reattach() -> None:
    state = ResumeState(4)
    state.receive(RewoundFrame(2, 10, 4))
    with pytest.raises(StreamDropError):
        state.eof()
    state.reattach()
    with pytest.raises(StreamTruncatedError):
        state.receive(chunk(11))  # a first chunk may jump, but not over the rewound debt


def test_head_below_cursor_is_never_a_silent_mix_of_two_runs() -> None:
    state = ResumeState(100)
    with pytest.raises(StreamTruncatedError) as info:
        state.receive(CaughtUpFrame(5))
    assert info.value.floor == 5


# -- terminals, eof and stickiness ---------------------------------------------------------------


def test_end_sets_terminal_and_later_frames_are_a_usage_error() -> None:
    state = ResumeState()
    feed(state, 1)
    end = EndFrame("interrupted", output={"x": 1})
    assert state.receive(end) == []
    assert state.terminal is end
    assert state.status is ResumeStatus.DONE
    state.eof()  # the body closes after its terminal: quiet
    with pytest.raises(UsageError) as first:
        state.receive(chunk(2))
    with pytest.raises(UsageError) as second:
        state.receive(CaughtUpFrame(1))
    assert second.value is first.value
    with pytest.raises(UsageError):
        state.reattach()
    with pytest.raises(UsageError):
        state.resume_from(0)


@pytest.mark.parametrize("recoverable", [True, False])
def test_fail_raises_with_its_detail_and_is_sticky(recoverable: bool) -> None:
    state = ResumeState()
    feed(state, 1, 2)
    frame = FailFrame("upstream died", recoverable, {"code": "UPSTREAM", "status": 502})
    with pytest.raises(StreamFailedError) as info:
        state.receive(frame)
    error = info.value
    assert error.retryable is recoverable
    assert error.recoverable is recoverable
    assert error.error == "upstream died"
    assert error.error_detail == {"code": "UPSTREAM", "status": 502}
    assert state.terminal is frame
    for call in (lambda: state.receive(chunk(3)), state.eof):
        with pytest.raises(StreamFailedError) as again:
            call()
        assert again.value is error
    if recoverable:
        assert state.reattach() == 2
        assert state.terminal is None
        assert feed(state, 3) == [3]
    else:
        with pytest.raises(StreamFailedError):
            state.reattach()


def test_truncated_raises_with_the_floor_and_resume_from_a_snapshot() -> None:
    state = ResumeState(3)
    with pytest.raises(StreamTruncatedError) as info:
        state.receive(TruncatedFrame(20, {"code": "TRUNCATED", "reason": "cleanup"}))
    assert info.value.floor == 20
    assert info.value.error_detail == {"code": "TRUNCATED", "reason": "cleanup"}
    with pytest.raises(StreamTruncatedError):
        state.receive(chunk(4))
    with pytest.raises(StreamTruncatedError):
        state.reattach()
    assert state.resume_from(20) == 20
    assert state.cursor == 20
    assert state.terminal is None
    assert feed(state, 20, 25, 26) == [25, 26]  # a snapshot's first chunk may jump


def test_eof_without_terminal_is_a_drop() -> None:
    state = ResumeState()
    feed(state, 1, 2)
    with pytest.raises(StreamDropError) as info:
        state.eof()
    assert info.value.retryable
    assert info.value.cursor == 2
    with pytest.raises(StreamDropError) as again:
        state.receive(chunk(3))
    assert again.value is info.value
    state.reattach()
    assert feed(state, 3) == [3]


def test_unknown_and_caught_up_hand_nothing_to_the_consumer() -> None:
    state = ResumeState()
    assert state.receive(UnknownFrame("error", "{}")) == []
    assert state.receive(CaughtUpFrame(0)) == []
    assert state.head == 0
    assert state.status is ResumeStatus.ATTACHED


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="cursor"):
        ResumeState(-1)
    state = ResumeState()
    with pytest.raises(StreamDropError):
        state.eof()
    with pytest.raises(ValueError, match="sequence"):
        state.resume_from(-1)


# -- any input at all: typed errors only, and never a sequence twice or out of order ---------------

Op = ChunkFrame | CaughtUpFrame | RewoundFrame | EndFrame | FailFrame | TruncatedFrame | UnknownFrame
ops = st.one_of(
    st.builds(chunk, st.integers(1, 12)),
    st.builds(CaughtUpFrame, st.integers(0, 12)),
    st.builds(RewoundFrame, st.integers(0, 3), st.none() | st.integers(0, 12),
              st.none() | st.integers(0, 12)),
    st.just(EndFrame("completed")),
    st.builds(FailFrame, st.just("x"), st.booleans()),
    st.builds(TruncatedFrame, st.integers(0, 12)),
    st.just(UnknownFrame("error", "{}")),
    st.sampled_from(["eof", "reattach"]),
    st.tuples(st.just("resume"), st.integers(0, 12)),
)


@settings(max_examples=300, deadline=None)
@given(script=st.lists(ops, max_size=40), cursor=st.integers(0, 3))
def test_any_frames_in_any_order_never_deliver_twice(
        script: list[Op | str | tuple[str, int]], cursor: int) -> None:
    state = ResumeState(cursor)
    last = cursor  # the last sequence handed out (a snapshot resets it)
    ended = False
    for op in script:
        try:
            if op == "eof":
                state.eof()
            elif op == "reattach":
                state.reattach()
            elif isinstance(op, tuple):
                last = state.resume_from(op[1])
            else:
                assert not isinstance(op, str)
                for item in state.receive(op):
                    if isinstance(item, ChunkFrame):
                        assert item.sequence > last
                        last = item.sequence
        except StreamwireError:
            pass
        assert state.cursor == last
        if ended:
            assert state.status is ResumeStatus.DONE  # end is final: exactly one outcome
        ended = state.status is ResumeStatus.DONE


# -- a rule-based machine: never twice, never out of order, exactly one outcome ------------------


class ResumeMachine(RuleBasedStateMachine):
    """A server log (``head`` chunks) serving one reader over many connections, with duplicates,
    drops, recoverable failures, gaps and terminals in any order."""

    @initialize(cursor=st.integers(0, 3))
    def start(self, cursor: int) -> None:
        self.head = cursor
        self.state = ResumeState(cursor)
        self.delivered: list[int] = list(range(1, cursor + 1))
        self.sent = cursor  # the server's position on this connection
        self.open = True
        self.outcome: str | None = None
        self.failed_at: int | None = None  # the cursor of the last recoverable fail

    def receive(self, frame: ChunkFrame | CaughtUpFrame | EndFrame | FailFrame | UnknownFrame,
                ) -> None:
        for item in self.state.receive(frame):
            assert isinstance(item, ChunkFrame)
            self.delivered.append(item.sequence)

    @rule(n=st.integers(1, 4))
    def append(self, n: int) -> None:
        self.head += n

    @precondition(lambda self: self.open and self.sent < self.head)
    @rule(k=st.integers(1, 3))
    def send_next(self, k: int) -> None:
        for seq in range(self.sent + 1, min(self.sent + k, self.head) + 1):
            self.receive(chunk(seq))
            self.sent = seq

    @precondition(lambda self: self.open and self.sent >= 1)
    @rule(back=st.integers(0, 5))
    def send_duplicate(self, back: int) -> None:
        self.receive(chunk(max(1, self.sent - back)))

    @precondition(lambda self: self.open and self.sent == self.head)
    @rule()
    def caught_up(self) -> None:
        self.receive(CaughtUpFrame(self.head))

    @precondition(lambda self: self.open)
    @rule()
    def unknown(self) -> None:
        self.receive(UnknownFrame("future", "{}"))

    @precondition(lambda self: self.open and self.state.status is ResumeStatus.STREAMING
                  and self.sent + 2 <= self.head)
    @rule()
    def skip(self) -> None:
        with pytest.raises(StreamGapError):
            self.receive(chunk(self.sent + 2))
        self.open = False

    @precondition(lambda self: self.open and self.outcome is None)
    @rule()
    def drop(self) -> None:
        with pytest.raises(StreamDropError) as info:
            self.state.eof()
        assert info.value.cursor == self.state.cursor
        self.open = False

    @precondition(lambda self: self.open and self.outcome is None)
    @rule()
    def recoverable_fail(self) -> None:
        # The same fail again at the same cursor is stored: it settles (RepeatedFail).
        repeated = self.failed_at == len(self.delivered)
        with pytest.raises(StreamFailedError) as info:
            self.receive(FailFrame("restart", True))
        assert info.value.recoverable
        assert info.value.retryable is not repeated
        self.failed_at = len(self.delivered)
        if repeated:
            self.outcome = "fail"
        self.open = False

    @precondition(lambda self: not self.open and self.outcome is None)
    @rule(replay_from=st.integers(0, 3))
    def reattach(self, replay_from: int) -> None:
        cursor = self.state.reattach()
        assert cursor == len(self.delivered)
        self.sent = max(0, cursor - replay_from)  # a server may replay a little too much
        self.open = True

    @precondition(lambda self: self.open and self.outcome is None and self.sent == self.head)
    @rule(final=st.sampled_from(["end", "fail"]))
    def terminal(self, final: str) -> None:
        if final == "end":
            self.receive(EndFrame("completed"))
            self.outcome = "end"
        else:
            with pytest.raises(StreamFailedError):
                self.receive(FailFrame("fatal", False))
            self.outcome = "fail"
        self.open = False

    @precondition(lambda self: self.outcome is not None)
    @rule()
    def after_the_outcome_everything_raises(self) -> None:
        with pytest.raises(StreamwireError):
            self.receive(chunk(self.head + 1))
        with pytest.raises(StreamwireError):
            self.state.reattach()

    @invariant()
    def never_twice_never_out_of_order(self) -> None:
        if not hasattr(self, "state"):
            return
        assert self.delivered == list(range(1, len(self.delivered) + 1))
        assert self.state.cursor == len(self.delivered)
        status = self.state.status
        assert (status is ResumeStatus.DONE) == (self.outcome == "end")
        if self.outcome == "fail":
            assert status is ResumeStatus.FAILED
        if self.outcome is None:
            assert status is not ResumeStatus.DONE
            assert self.open or status in {ResumeStatus.DETACHED, ResumeStatus.FAILED}


TestResumeMachine = ResumeMachine.TestCase
TestResumeMachine.settings = settings(max_examples=120, stateful_step_count=40, deadline=None)
