"""The stream routes read ``Last-Event-ID``, ``Origin`` and ``?cursor=`` from the ASGI scope
directly (``server._asgi.header_of``, ``query_param``): each gives what Starlette's
``request.headers.get`` and ``request.query_params.get`` give, for any query and any headers."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from streamwire.server._asgi import header_of, query_param

# parameters made of what a query's parsing turns on (``=``, ``&``, ``+``, ``%``, repeats,
# blanks) and a few other characters, non-ASCII included
keys = st.sampled_from(["cursor", "cursor", "curs%6Fr", "a", "", "x+y", "é", "%C3%A9"])
values = st.text(alphabet="05+%=; é3D", max_size=4)
parameters = st.one_of(keys, st.tuples(keys, values).map("=".join))
queries = st.lists(parameters, max_size=5).map("&".join)


def request(query: bytes, headers: list[tuple[bytes, bytes]]) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/", "query_string": query,
                    "headers": headers})


@settings(max_examples=1000)
@given(query=queries.map(lambda q: q.encode()), name=st.sampled_from(["cursor", "a", "é", "x"]))
@example(query=b"cursor=4+2", name="cursor")
@example(query=b"cursor=1&cursor=2", name="cursor")
def test_a_query_parameter_is_what_starlette_gives(query: bytes, name: str) -> None:
    req = request(query, [])
    assert query_param(req.scope, name) == req.query_params.get(name)


def test_a_query_parameter_the_last_wins_and_blank_is_empty() -> None:
    assert query_param(request(b"cursor=1&x=2&cursor=3", []).scope, "cursor") == "3"
    assert query_param(request(b"cursor", []).scope, "cursor") == ""
    assert query_param(request(b"", []).scope, "cursor") is None
    assert query_param(request(b"curs%6Fr=4+2", []).scope, "cursor") == "4 2"


header_names = st.sampled_from([b"origin", b"last-event-id", b"host", b"x-origin"])
header_values = st.binary(max_size=8)


@settings(max_examples=500)
@given(headers=st.lists(st.tuples(header_names, header_values), max_size=6),
       name=st.sampled_from([b"origin", b"last-event-id"]))
def test_a_header_is_what_starlette_gives(headers: list[tuple[bytes, bytes]],
                                          name: bytes) -> None:
    req = request(b"", headers)
    assert header_of(req.scope, name) == req.headers.get(name.decode())
