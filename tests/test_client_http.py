"""The client's HTTP rules (``client._http``): one ``Retry-After`` parser for both of its forms,
one bearer header, and every caller using them."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwire.client._core import DEFAULT_MAX_ELAPSED
from streamwire.client._http import (
    MAX_RETRY_AFTER,
    bearer_headers,
    parse_retry_after,
    response_error,
)
from streamwire.client._producer_core import DEFAULT_PRODUCER_RETRY, ProducerSession
from streamwire.errors import ResponseStatusError

#: 2015-10-21 07:28:00 GMT, the RFC's example date, as a timestamp.
WHEN = datetime(2015, 10, 21, 7, 28, tzinfo=UTC).timestamp()


class TestParseRetryAfter:
    @pytest.mark.parametrize(("value", "seconds"), [
        (None, None),
        ("0", 0.0),
        ("7", 7.0),
        ("  7 ", 7.0),
        ("120", 120.0),
        ("121", MAX_RETRY_AFTER),  # bounded
        ("9" * 40, MAX_RETRY_AFTER),  # no float overflow, no int-digits error
        ("", None),
        ("soon", None),
        ("-1", None),  # delay-seconds is 1*DIGIT
        ("1.5", None),
        ("\u00b2", None),  # a Unicode digit: str.isdigit() is True, float() would raise
        ("\u0663", None),  # ARABIC-INDIC DIGIT THREE
        ("Wed, 99 Oct 2015 07:28:00 GMT", None),  # a date that does not exist
    ])
    def test_delay_seconds_and_garbage(self, value: str | None, seconds: float | None) -> None:
        assert parse_retry_after(value, now=WHEN) == seconds

    @pytest.mark.parametrize("value", [
        "Wed, 21 Oct 2015 07:28:30 GMT",  # IMF-fixdate
        "Wednesday, 21-Oct-15 07:28:30 GMT",  # obsolete RFC 850 format
        "Wed Oct 21 07:28:30 2015",  # obsolete asctime format (GMT by definition)
        "Wed, 21 Oct 2015 09:28:30 +0200",  # not HTTP, but a zone is honoured
    ])
    def test_http_date_in_every_form_the_rfc_accepts(self, value: str) -> None:
        assert parse_retry_after(value, now=WHEN) == 30.0

    def test_a_date_in_the_past_is_now_and_one_far_ahead_is_bounded(self) -> None:
        assert parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now=WHEN) == 0.0
        assert parse_retry_after("Thu, 22 Oct 2015 07:28:00 GMT", now=WHEN) == MAX_RETRY_AFTER

    def test_the_bound_is_the_default_outage_cap(self) -> None:
        assert MAX_RETRY_AFTER == DEFAULT_MAX_ELAPSED

    @given(st.text())
    def test_any_text_is_a_bounded_wait_or_none(self, value: str) -> None:
        seconds = parse_retry_after(value, now=WHEN)
        assert seconds is None or 0.0 <= seconds <= MAX_RETRY_AFTER

    @given(st.integers(min_value=0, max_value=10**30))
    def test_any_delay_seconds_is_itself_up_to_the_bound(self, delay: int) -> None:
        assert parse_retry_after(str(delay)) == min(float(delay), MAX_RETRY_AFTER)

    @given(st.integers(min_value=-10**6, max_value=10**6))
    def test_any_http_date_is_its_distance_from_now(self, offset: int) -> None:
        value = email.utils.formatdate(WHEN + offset, usegmt=True)
        assert parse_retry_after(value, now=WHEN) == min(max(float(offset), 0.0), MAX_RETRY_AFTER)


class TestRetryAfterCallers:
    """The reader's and the producer's errors both carry the parsed wait, for either form."""

    @pytest.mark.parametrize("value", ["30", email.utils.formatdate(WHEN + 30, usegmt=True)])
    def test_reader_error(self, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr("time.time", lambda: WHEN)
        error = response_error(503, "text/plain", value, b"restarting")
        assert error is not None
        assert error.retryable
        assert error.retry_after == 30.0

    @pytest.mark.parametrize("value", ["30", email.utils.formatdate(WHEN + 30, usegmt=True)])
    def test_producer_error(self, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr("time.time", lambda: WHEN)
        session = ProducerSession("s1", "p1", 0, 0, DEFAULT_PRODUCER_RETRY)
        call = session.chunks([(0, "hi")])
        with pytest.raises(ResponseStatusError) as info:
            session.answer(call, 503, b'{"outcome": "not-stored"}', value)
        assert info.value.retryable
        assert info.value.retry_after == 30.0

    def test_no_header_is_no_wait(self) -> None:
        error = response_error(503, "", None, b"")
        assert error is not None
        assert error.retry_after is None


class TestBearerHeaders:
    def test_a_token_is_one_header_and_none_is_none(self) -> None:
        assert bearer_headers("s3cr3t-._~+/=") == {"Authorization": "Bearer s3cr3t-._~+/="}
        assert bearer_headers(None) == {}

    @pytest.mark.parametrize("token", ["", "two words", "line\nbreak", "caf\u00e9", "tab\t"])
    def test_a_token_the_server_could_never_match_is_refused(self, token: str) -> None:
        with pytest.raises(ValueError, match="visible ASCII"):
            bearer_headers(token)
