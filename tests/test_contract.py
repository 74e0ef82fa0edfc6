"""Contracts: declaration, inheritance, duplicate names, resolve(), decode validation and encoding.

This module uses ``from __future__ import annotations`` on purpose: payload TypedDicts declared
under PEP 563 must keep their NotRequired keys optional (``__required_keys__`` gets them wrong).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, ClassVar, Literal, NotRequired, Required, TypedDict, final

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwire.contract import Contract, Event, Message, is_event
from streamwire.errors import ContractError, PayloadError, StreamwireError


@final
class Invoice(TypedDict):
    id: str
    cents: int
    note: NotRequired[str]


@final
class Steps(TypedDict):
    steps: list[str]


@final
class Done(TypedDict):
    done: Literal[True]


@final
class Text(TypedDict):
    chunk: str


@final
class Empty(TypedDict):
    pass


@final
class Partial(TypedDict, total=False):
    a: Required[int]
    b: str


@final
class AsInt(TypedDict):
    value: int


@final
class AsText(TypedDict):
    value: str
    unit: NotRequired[str]


class Billing(Contract):
    invoice: Event[Invoice] = Event("billing.invoice")
    status: Event[Literal["open", "paid"]] = Event()
    progress: Event[Steps | Done | Text] = Event()
    clear: Event[Empty] = Event()
    tags: Event[list[str]] = Event()


class MoreBilling(Billing):
    refund: Event[Invoice] = Event()


class Other(Contract):
    status: Event[int] = Event("other.status")


class Odd(Contract):
    """Unions msgspec cannot decode directly, made decodable by the key-presence rule."""

    overlap: Event[AsInt | AsText] = Event()
    maybe: Event[Steps | Done | None] = Event()
    partial: Event[Partial | Done] = Event()
    explicit = Event[Text]("explicit")


# --- declaration ------------------------------------------------------------------------------


class TestDeclaration:
    def test_events_in_declaration_order_with_wire_names(self) -> None:
        assert list(Billing.events()) == ["billing.invoice", "status", "progress", "clear", "tags"]
        assert Billing.invoice.name == "billing.invoice"
        assert Billing.status.name == "status"
        assert Billing.invoice.contract is Billing
        assert Billing.events()["billing.invoice"] is Billing.invoice

    def test_event_named(self) -> None:
        assert Billing.event_named("status") is Billing.status
        assert Billing.event_named("invoice") is None  # the attribute name is not the wire name
        assert Billing.event_named("nope") is None

    def test_events_is_read_only(self) -> None:
        events: Any = Billing.events()
        with pytest.raises(TypeError):
            events["x"] = Billing.status

    def test_extension_inherits_events_first(self) -> None:
        assert list(MoreBilling.events()) == [*Billing.events(), "refund"]
        # an inherited event is the same object, bound to the contract that declares it
        assert MoreBilling.status is Billing.status
        assert MoreBilling.status.contract is Billing
        assert MoreBilling.refund.contract is MoreBilling
        assert "refund" not in Billing.events()

    def test_diamond_inheritance_keeps_one_copy(self) -> None:
        class Left(Billing):
            left: Event[int] = Event()

        class Right(Billing):
            right: Event[int] = Event()

        class Both(Left, Right):
            pass

        assert list(Both.events()) == [*Billing.events(), "left", "right"]

    def test_duplicate_wire_name_in_one_contract(self) -> None:
        with pytest.raises(ContractError, match="wire name 'x'"):
            class Bad(Contract):
                a: Event[int] = Event("x")
                b: Event[int] = Event("x")

    def test_duplicate_wire_name_with_an_inherited_event(self) -> None:
        with pytest.raises(ContractError, match=r"Billing\.status and .*Bad\.other"):
            class Bad(Billing):
                other: Event[int] = Event("status")

    def test_duplicate_wire_name_across_two_bases(self) -> None:
        class A(Contract):
            x: Event[int] = Event()

        class B(Contract):
            x: Event[str] = Event()

        with pytest.raises(ContractError, match="wire name 'x'"):
            class Both(A, B):  # type: ignore[misc]
                pass

    def test_hiding_an_inherited_event(self) -> None:
        with pytest.raises(ContractError, match="hides the event 'status'"):
            class Redeclared(Billing):
                status: Event[int] = Event("status2")  # type: ignore[assignment]
        with pytest.raises(ContractError, match="hides the event"):
            class Shadowed(Billing):
                status = 3  # type: ignore[assignment]

    def test_one_event_instance_per_attribute(self) -> None:
        shared: Event[int] = Event()
        with pytest.raises(ContractError, match="one contract attribute only"):
            class Twice(Contract):
                a = shared
                b = shared

    @pytest.mark.parametrize("name", ["", "a\nb", "a\rb", "a\x00b", "a:b"])
    def test_bad_wire_names(self, name: str) -> None:
        with pytest.raises(ContractError):
            Event(name)

    def test_event_outside_a_contract(self) -> None:
        class NotAContract:
            x: Event[int] = Event()

        with pytest.raises(ContractError, match=r"NotAContract\.x"):
            _ = NotAContract.x

    def test_contracts_are_not_instantiated(self) -> None:
        with pytest.raises(TypeError, match="not instantiated"):
            Billing()

    def test_contract_error_is_a_type_error_and_a_streamwire_error(self) -> None:
        assert issubclass(ContractError, TypeError)
        assert issubclass(ContractError, StreamwireError)

    def test_repr(self) -> None:
        assert repr(Billing.invoice) == "<BoundEvent Billing.invoice event='billing.invoice'>"


# --- resolve ----------------------------------------------------------------------------------


class TestResolve:
    def test_resolve_builds_every_decoder(self) -> None:
        class Fresh(Contract):
            a: Event[Text] = Event()
            b: Event[Steps | Done] = Event()

        Fresh.resolve()
        Fresh.resolve()  # idempotent
        assert Fresh.a.payload_type is Text
        assert Fresh.b.decode('{"done":true}') == {"done": True}

    def test_unsupported_type_fails_at_resolve(self) -> None:
        class Nested(Contract):
            items: Event[list[Steps | Done]] = Event()  # a keyed union below the top level

        with pytest.raises(ContractError, match=r"event 'items'.*split the event"):
            Nested.resolve()

    def test_unsupported_type_fails_at_first_decode_too(self) -> None:
        class Weird(Contract):
            t: Event[dict[str, int] | Steps] = Event()

        with pytest.raises(ContractError, match="msgspec cannot decode"):
            Weird.t.decode(b"1")

    def test_missing_annotation(self) -> None:
        class Unannotated(Contract):
            foo = Event("foo")  # type: ignore[var-annotated]

        with pytest.raises(ContractError, match="needs a payload type"):
            Unannotated.resolve()

    def test_explicit_specialisation_without_annotation(self) -> None:
        assert Odd.explicit.payload_type is Text
        assert Odd.explicit.decode('{"chunk":"x"}') == {"chunk": "x"}

    def test_unresolvable_forward_reference(self) -> None:
        class Dangling(Contract):
            x: Event[NoSuchType] = Event()  # type: ignore[name-defined]  # noqa: F821

        with pytest.raises(ContractError, match="cannot resolve the annotations"):
            Dangling.resolve()

    def test_classvar_annotation(self) -> None:
        class WithClassVar(Contract):
            x: ClassVar[Event[int]] = Event()

        assert WithClassVar.x.decode(b"3") == 3

    def test_every_contract_here_resolves(self) -> None:
        for contract in (Billing, MoreBilling, Other, Odd):
            contract.resolve()


# --- decoding ---------------------------------------------------------------------------------


class TestDecode:
    def test_object_from_str_and_bytes(self) -> None:
        raw = '{"id":"i1","cents":250}'
        assert Billing.invoice.decode(raw) == {"id": "i1", "cents": 250}
        assert Billing.invoice.decode(raw.encode()) == {"id": "i1", "cents": 250}

    def test_not_required_key_under_pep_563(self) -> None:
        assert Billing.invoice.decode('{"id":"i","cents":1,"note":"n"}')["note"] == "n"
        assert "note" not in Billing.invoice.decode('{"id":"i","cents":1}')

    @pytest.mark.parametrize(("raw", "where"), [
        ('{"id":"i"}', "cents"),                 # missing required key
        ('{"id":"i","cents":"1"}', "cents"),     # wrong type
        ('{"id":1,"cents":1}', "id"),            # wrong type
        ('{"id":"i","cents":1.5}', "cents"),     # float is not int
        ('{"id":"i","cents":true}', "cents"),    # bool is not int
        ('["i",1]', "object"),                   # an array where an object is declared
        ('"i"', "object"),
        ("null", "object"),
    ])
    def test_wrong_shapes_are_payload_errors(self, raw: str, where: str) -> None:
        with pytest.raises(PayloadError, match=where) as info:
            Billing.invoice.decode(raw)
        assert info.value.event == "billing.invoice"
        assert info.value.raw == raw
        assert info.value.status_hint == 422
        assert info.value.retryable is False
        assert info.value.__cause__ is None  # msgspec's exception is not chained, only its text

    @pytest.mark.parametrize("raw", ["", "{", '{"id":"i","cents":1', "nope", "{'id':1}", '{"a":1}x'])
    def test_malformed_json_is_a_payload_error(self, raw: str) -> None:
        with pytest.raises(PayloadError, match=r"billing\.invoice"):
            Billing.invoice.decode(raw)

    def test_unknown_keys_are_dropped(self) -> None:
        assert Billing.invoice.decode('{"id":"i","cents":1,"extra":[1,2]}') == {"id": "i", "cents": 1}
        assert Billing.clear.decode('{"x":1}') == {}

    def test_empty_object(self) -> None:
        assert Billing.clear.decode("{}") == {}
        for raw in ("[]", "null", '""'):
            with pytest.raises(PayloadError):
                Billing.clear.decode(raw)

    def test_bare_array(self) -> None:
        assert Billing.tags.decode('["a","b"]') == ["a", "b"]
        assert Billing.tags.decode("[]") == []
        for raw in ('{"tags":["a"]}', '["a",1]', '"a"'):
            with pytest.raises(PayloadError):
                Billing.tags.decode(raw)

    def test_literal(self) -> None:
        assert Billing.status.decode('"paid"') == "paid"
        with pytest.raises(PayloadError):
            Billing.status.decode('"void"')

    @pytest.mark.parametrize(("raw", "expected"), [
        ('{"steps":["a","b"]}', {"steps": ["a", "b"]}),
        ('{"done":true}', {"done": True}),
        ('{"chunk":"x"}', {"chunk": "x"}),
        ('{"chunk":"x","unknown":1}', {"chunk": "x"}),
    ])
    def test_key_presence_union_members(self, raw: str, expected: dict[str, Any]) -> None:
        assert Billing.progress.decode(raw) == expected
        assert Billing.progress.decode(raw) == expected  # the memoised path gives the same

    @pytest.mark.parametrize("raw", [
        '{"steps":[],"done":true}',  # two members at once
        '{"chunk":"x","done":true}',
        "{}",                        # no member
        '{"unknown":1}',
        '{"done":false}',            # Literal[True]
        '{"steps":"a"}',
        '{"chunk":1}',
        '["x"]',
        "null",
    ])
    def test_key_presence_union_rejects(self, raw: str) -> None:
        with pytest.raises(PayloadError, match="progress"):
            Billing.progress.decode(raw)

    def test_union_member_with_a_key_of_another_type(self) -> None:
        assert Odd.overlap.decode('{"value":1}') == {"value": 1}
        assert Odd.overlap.decode('{"value":"1","unit":"s"}') == {"value": "1", "unit": "s"}
        assert Odd.overlap.decode('{"value":"1"}') == {"value": "1"}
        with pytest.raises(PayloadError, match="matches no member"):
            Odd.overlap.decode('{"value":1,"unit":"s"}')  # only AsText has unit, and wants a str
        with pytest.raises(PayloadError):
            Odd.overlap.decode('{"value":1.5}')

    def test_union_with_none(self) -> None:
        assert Odd.maybe.decode("null") is None
        assert Odd.maybe.decode('{"done":true}') == {"done": True}
        with pytest.raises(PayloadError):
            Odd.maybe.decode('"x"')

    def test_union_member_with_optional_keys(self) -> None:
        assert Odd.partial.decode('{"a":1}') == {"a": 1}
        assert Odd.partial.decode('{"a":1,"b":"x"}') == {"a": 1, "b": "x"}
        assert Odd.partial.decode('{"done":true}') == {"done": True}
        with pytest.raises(PayloadError):
            Odd.partial.decode('{"b":"x"}')  # a is required

    def test_union_key_order_does_not_matter(self) -> None:
        assert Odd.overlap.decode('{"unit":"s","value":"1"}') == {"value": "1", "unit": "s"}

    @given(st.text())
    def test_any_text_decodes_or_raises_payload_error(self, raw: str) -> None:
        for event in (Billing.invoice, Billing.progress, Billing.tags, Odd.overlap):
            with contextlib.suppress(PayloadError):  # anything else escapes and fails the test
                event.decode(raw)

    @given(st.lists(st.sampled_from(["steps", "done", "chunk", "x"]), unique=True),
           st.sampled_from(['["s"]', "true", '"c"', "1"]))
    def test_a_union_value_is_always_exactly_one_member(self, keys: list[str], value: str) -> None:
        raw = "{" + ",".join(f'"{k}":{value}' for k in keys) + "}"
        try:
            got = Billing.progress.decode(raw)
        except PayloadError:
            return
        shapes = [({"steps"}, list), ({"done"}, bool), ({"chunk"}, str)]
        assert any(set(got) == k and all(isinstance(v, t) for v in got.values()) for k, t in shapes)


# --- messages and encoding --------------------------------------------------------------------


class TestMessages:
    def test_message_fields(self) -> None:
        msg = Billing.invoice({"id": "i", "cents": 1})
        assert msg.event is Billing.invoice
        assert msg.data == {"id": "i", "cents": 1}
        assert msg.name == "billing.invoice"
        assert msg.encode() == b'{"id":"i","cents":1}'
        assert isinstance(msg, Message)

    def test_message_is_frozen_and_compares_by_value(self) -> None:
        msg = Billing.tags(["a"])
        with pytest.raises(AttributeError):
            msg.data = ["b"]  # type: ignore[misc]
        assert msg == Billing.tags(["a"])
        assert msg != Billing.tags(["b"])

    def test_is_event(self) -> None:
        msg: Message[Billing, Any] = Billing.status("paid")
        assert is_event(msg, Billing.status)
        assert not is_event(msg, Billing.tags)
        assert not is_event(msg, Other.status)  # another contract's event with a similar name
        assert is_event(MoreBilling.status("open"), Billing.status)

    def test_encoding_is_compact_and_keeps_declared_keys(self) -> None:
        payload: Invoice = {"id": "ü\n\"x\"", "cents": -1, "note": "😀"}
        raw = Billing.invoice.encode(payload)
        assert raw == '{"id":"ü\\n\\"x\\"","cents":-1,"note":"😀"}'.encode()
        assert b"\n" not in raw  # one SSE data line, whatever the payload holds
        assert Billing.invoice.decode(raw) == payload
        assert json.loads(raw) == payload

    def test_encoding_other_shapes(self) -> None:
        assert Billing.clear.encode({}) == b"{}"
        assert Billing.tags.encode([]) == b"[]"
        assert Billing.status.encode("open") == b'"open"'
        assert Odd.maybe.encode(None) == b"null"

    def test_unencodable_payload_is_a_payload_error(self) -> None:
        bad: Any = {"id": object(), "cents": 1}
        with pytest.raises(PayloadError, match="cannot encode"):
            Billing.invoice.encode(bad)
        with pytest.raises(PayloadError, match="cannot encode"):
            Billing.invoice(bad).encode()

    @given(st.text(), st.integers(min_value=-(2**63), max_value=2**64 - 1), st.text() | st.none())
    def test_round_trip(self, ident: str, cents: int, note: str | None) -> None:
        payload: Invoice = {"id": ident, "cents": cents}
        if note is not None:
            payload["note"] = note
        try:
            raw = Billing.invoice.encode(payload)
        except PayloadError:
            # only a lone surrogate cannot be UTF-8 encoded
            assert any(0xD800 <= ord(c) <= 0xDFFF for c in ident + (note or ""))
            return
        assert Billing.invoice.decode(raw) == payload
        assert Billing.invoice.decode(raw.decode()) == payload


def test_decode_validates_like_msgspec_directly() -> None:
    """The decoder is msgspec's, built from the annotation: same result, same strictness."""
    direct = msgspec.json.Decoder(Invoice)
    raw = b'{"id":"x","cents":3,"note":"y","z":0}'
    assert Billing.invoice.decode(raw) == direct.decode(raw)


@pytest.mark.parametrize("attr", ["events", "event_named", "resolve"])
def test_an_event_cannot_hide_the_contract_api(attr: str) -> None:
    with pytest.raises(ContractError, match=f"would hide Contract.{attr}"):
        type("Bad", (Contract,), {"__annotations__": {attr: "Event[int]"}, attr: Event()})

    class Renamed(Contract):
        events_: Event[int] = Event("events")  # the wire name itself is free

    assert Renamed.event_named("events") is Renamed.events_
