"""Typed event contracts: wire name <-> payload type, checked statically and validated at decode.

A contract is a class whose attributes declare its events; the attribute's annotation carries the
payload type, and the wire name (the SSE ``event:`` field) defaults to the attribute name::

    @final
    class Invoice(TypedDict):
        id: str
        cents: int

    class Billing(Contract):
        invoice: Event[Invoice] = Event("billing.invoice")
        paid: Event[list[str]] = Event()

    msg = Billing.invoice({"id": "i1", "cents": 100})   # payload checked by mypy and pyright here
    msg.encode()                                        # b'{"id":"i1","cents":100}'
    Billing.invoice.decode(b'{"id":"i1","cents":1}')    # validated; PayloadError on a wrong shape

Why this design (over a TypeScript-style ``send(event, data)``, overloads, or generated code):

* The payload is checked in ``BoundEvent.__call__(self, data: T)``, where ``T`` is already fixed by the
  descriptor, so a dict literal gets full TypedDict context in both checkers. The TypeScript shape
  ``send(event, data)`` trips mypy's inference bug (python/mypy#19201) on *valid* code, and
  overload- or codegen-based designs need a generator for every user contract.
* ``Message`` is contravariant in the contract, so a writer for ``MyChat(Chat)`` accepts
  ``Chat.chunk(...)`` while a ``Chat`` writer rejects another contract's messages.
* Payload types are TypedDicts (and lists, literals, ...): the only types that express all four
  TypeScript shapes of the TRD (objects, bare arrays, key-presence unions, the empty object)
  statically in both checkers. Mark them ``@final`` so that mypy narrows ``"steps" in data``.
* At run time each event gets one ``msgspec.json.Decoder`` built (lazily, or all at once by
  ``resolve()``) from its annotation: it validates and still costs less than ``json.loads`` of the same
  bytes. msgspec refuses untagged unions of TypedDicts, so a union told apart by which key is present
  (``progress``) is decoded once with a merged ``total=False`` TypedDict and the member is picked by
  its key set: its required keys present, no key of another member's.

Decoding rules (documented behaviour):

* A payload that is not JSON, or does not match the declared type, raises ``PayloadError`` (never a
  wrongly typed value). Keys a TypedDict does not declare are dropped (msgspec's rule; it matches
  TypeScript's structural typing and lets a server add fields without breaking old readers), so
  ``clear`` decodes ``{"x": 1}`` to ``{}``. In a key-presence union an object that fits no member,
  or several at once (``{"steps": [], "done": true}``), is a ``PayloadError``.
* Declare contracts and payload types at module level: annotations are resolved with
  ``typing.get_type_hints`` the first time they are needed, so forward references work. Call
  ``MyContract.resolve()`` in a unit test so an unsupported type fails there (``ContractError``)
  instead of at the first event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import reduce
from types import MappingProxyType
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Final,
    Generic,
    NotRequired,
    Required,
    TypedDict,
    TypeGuard,
    TypeVar,
    final,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
    overload,
)

import msgspec

from .errors import ContractError, PayloadError

if TYPE_CHECKING:
    from typing_extensions import TypeIs

__all__ = ["BoundEvent", "Contract", "Event", "Message", "is_event"]

T = TypeVar("T")
C = TypeVar("C", bound="Contract")
C_contra = TypeVar("C_contra", bound="Contract", contravariant=True)

# One encoder for every event: msgspec encoders are stateless and reusable (msgspec perf-tips).
_ENCODER: Final = msgspec.json.Encoder()
# A key-presence union memoises which member each key set picks; key sets are subsets of the
# declared keys (undeclared keys are dropped first), and this caps the memo for very wide unions.
_MAX_KEYSET_MEMO: Final = 256


class Contract:
    """Base of every contract. Subclass it; its ``Event[...]`` class attributes are its events.

    A contract may extend another (events are inherited). Two events with one wire name, or an
    attribute that hides an inherited event, raise ``ContractError`` when the class is created.
    Contracts are namespaces: they are never instantiated.
    """

    _events: ClassVar[Mapping[str, BoundEvent[Any, Any]]] = MappingProxyType({})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        events: dict[str, BoundEvent[Any, Any]] = {}
        for base in cls.__bases__:
            if issubclass(base, Contract):
                for name, bound in base._events.items():
                    _add_event(cls, events, name, bound)
        for attr, value in vars(cls).items():
            if _is_event(value):
                if attr in _RESERVED:
                    raise ContractError(f"{cls.__qualname__}.{attr} would hide Contract.{attr}; "
                                        f"name the attribute otherwise and keep the wire name "
                                        f"with Event({attr!r})")
                if value.bound is not None or len(value.sites) != 1:
                    raise ContractError(f"{cls.__qualname__}.{attr}: an Event instance belongs to "
                                        f"one contract attribute only (it is {value.sites})")
                name = attr if value.name is None else value.name
                _check_wire_name(name)
                value.bound = BoundEvent(cls, name, attr, value)
                _add_event(cls, events, name, value.bound)
        for bound in events.values():
            owned = vars(cls).get(bound.attr)
            if owned is not None and not (_is_event(owned) and owned.bound is bound):
                raise ContractError(f"{cls.__qualname__}.{bound.attr} hides the event "
                                    f"{bound.name!r} inherited from {bound.contract.__qualname__}")
        cls._events = MappingProxyType(events)

    def __new__(cls) -> Contract:
        raise TypeError(f"{cls.__qualname__} is a contract (a namespace of events); "
                        "it is not instantiated")

    @classmethod
    def events(cls) -> Mapping[str, BoundEvent[Any, Any]]:
        """Wire name -> bound event, inherited events first, in declaration order."""
        return cls._events

    @classmethod
    def event_named(cls, name: str) -> BoundEvent[Any, Any] | None:
        """The event with this wire name, or None if the contract has none."""
        return cls._events.get(name)

    @classmethod
    def resolve(cls) -> None:
        """Build every event's decoder now; raises ``ContractError`` for an unsupported type."""
        for bound in cls._events.values():
            bound.resolve()


_RESERVED: Final = frozenset({"events", "event_named", "resolve"})


def _add_event(cls: type[Contract], events: dict[str, BoundEvent[Any, Any]], name: str,
               bound: BoundEvent[Any, Any]) -> None:
    seen = events.get(name)
    if seen is bound:
        return  # the same event reached twice through a diamond of contracts
    if seen is not None:
        raise ContractError(
            f"{cls.__qualname__}: two events have the wire name {name!r} "
            f"({seen.contract.__qualname__}.{seen.attr} and "
            f"{bound.contract.__qualname__}.{bound.attr}); give one of them another name")
    events[name] = bound


def _is_event(value: object) -> TypeIs[Event[Any]]:
    # A TypeIs helper: a bare isinstance narrows to Event[Unknown] in pyright strict.
    return isinstance(value, Event)


class Event(Generic[T]):
    """Declares one event of a contract: ``chunk: Event[ChunkPayload] = Event()``.

    ``name`` is the SSE ``event:`` field; it defaults to the attribute name. Reading the attribute
    from the contract gives the ``BoundEvent``.
    """

    __slots__ = ("__orig_class__", "bound", "name", "sites")  # __orig_class__: Event[X]()

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            _check_wire_name(name)
        self.name = name
        self.bound: BoundEvent[Any, T] | None = None
        self.sites: list[str] = []  # every "Class.attr" this instance was assigned to

    def __set_name__(self, owner: type[Any], attr: str) -> None:
        # Only recorded here: Python 3.11 wraps an exception raised in __set_name__ in a
        # RuntimeError, so ``Contract.__init_subclass__`` checks and binds instead.
        self.sites.append(f"{owner.__qualname__}.{attr}")

    @overload
    def __get__(self, obj: None, owner: type[C]) -> BoundEvent[C, T]: ...
    @overload
    def __get__(self, obj: C, owner: type[C] | None = None) -> BoundEvent[C, T]: ...
    def __get__(self, obj: object, owner: type[Any] | None = None) -> BoundEvent[Any, T]:
        bound = self.bound
        if bound is None:
            where = ", ".join(self.sites) or "nowhere"
            raise ContractError(f"an Event must be a class attribute of a Contract subclass "
                                f"(this one is declared on {where})")
        return bound


def _check_wire_name(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise ContractError(f"an event's wire name must be a non-empty str, not {name!r}")
    if "\r" in name or "\n" in name or "\x00" in name or ":" in name:
        # An ``event:`` field cannot carry a line end; a colon or NUL would not survive a proxy's
        # field parsing unchanged, so a wire name with one would never match on the reading side.
        raise ContractError(f"event wire name {name!r} contains CR, LF, NUL or ':'")


@final
class BoundEvent(Generic[C_contra, T]):
    """One event of a contract: its wire ``name``, its payload codec, and a message factory.

    ``contract`` is the contract that declares it (an inherited event keeps its declaring contract).
    """

    __slots__ = ("_decode", "_payload_type", "attr", "contract", "declaration", "name")

    def __init__(self, contract: type[Contract], name: str, attr: str, declaration: Event[T]
                 ) -> None:
        self.contract = contract
        self.name = name
        self.attr = attr
        self.declaration = declaration
        self._payload_type: Any = _UNRESOLVED
        # Resolves on first use, then replaces itself with the built decoder (no branch per event).
        self._decode: Callable[[str | bytes], Any] = self._first_decode

    def __repr__(self) -> str:
        return f"<BoundEvent {self.contract.__qualname__}.{self.attr} event={self.name!r}>"

    def __call__(self, data: T) -> Message[C_contra, T]:
        """The message that sends ``data`` as this event (statically checked against ``T``)."""
        return Message(self, data)

    def decode(self, raw: str | bytes) -> T:
        """Parse and validate one payload; raises ``PayloadError`` on bad JSON or a wrong shape."""
        try:
            return self._decode(raw)  # type: ignore[no-any-return]
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise PayloadError(f"event {self.name!r}: {exc}", event=self.name, raw=raw) from None

    def encode(self, data: T) -> bytes:
        """The compact JSON of ``data``; keys are written exactly as the payload type declares."""
        try:
            return _ENCODER.encode(data)
        except (TypeError, msgspec.EncodeError) as exc:
            raise PayloadError(f"event {self.name!r}: cannot encode payload: {exc}",
                               event=self.name, raw=b"") from exc

    @property
    def payload_type(self) -> Any:
        """The declared payload type ``T`` (resolving the contract's annotations if needed)."""
        if self._payload_type is _UNRESOLVED:
            self._payload_type = _payload_type_of(self)
        return self._payload_type

    def resolve(self) -> None:
        """Build the decoder now; raises ``ContractError`` if ``T`` is not supported."""
        if self._decode == self._first_decode:
            self._decode = _build_decoder(self.name, self.payload_type)

    def _first_decode(self, raw: str | bytes) -> Any:
        self.resolve()
        return self._decode(raw)


_UNRESOLVED: Final = object()


def _payload_type_of(bound: BoundEvent[Any, Any]) -> Any:
    owner = bound.contract
    where = f"{owner.__qualname__}.{bound.attr}"
    try:
        hints = get_type_hints(owner, include_extras=True)
    except Exception as exc:  # NameError and friends: an unresolvable forward reference
        raise ContractError(f"cannot resolve the annotations of {owner.__qualname__}: {exc!r}; "
                            "declare contracts and payload types at module level") from exc
    ann = hints.get(bound.attr)
    if get_origin(ann) is ClassVar:
        (ann,) = get_args(ann)
    if get_origin(ann) is Event:
        return get_args(ann)[0]
    explicit = getattr(bound.declaration, "__orig_class__", None)  # Event[X]() without annotation
    if get_origin(explicit) is Event:
        return get_args(explicit)[0]
    raise ContractError(f"{where} needs a payload type: annotate it as "
                        f"`{bound.attr}: Event[Payload] = Event(...)`")


def _build_decoder(name: str, tp: Any) -> Callable[[str | bytes], Any]:
    try:
        return msgspec.json.Decoder(tp).decode
    except TypeError as exc:
        keyed = _maybe_keyed_union(tp)
        if keyed is None:
            raise ContractError(
                f"event {name!r}: msgspec cannot decode {tp!r} ({exc}). A union of object types "
                "must be either told apart by which keys are present (a top-level union of "
                "TypedDicts) or tagged; otherwise split the event") from exc
        return keyed


@final
class _Member:
    """One TypedDict of a key-presence union, with its key sets derived robustly."""

    __slots__ = ("declared", "hints", "required", "tp")

    def __init__(self, tp: Any) -> None:
        self.tp = tp
        hints = get_type_hints(tp, include_extras=True)
        required: set[str] = set()
        for key, hint in hints.items():
            origin = get_origin(hint)
            # Re-derived from the hints: under PEP 563 ``__required_keys__`` misses NotRequired.
            if origin is Required or (origin is not NotRequired
                                      and key in getattr(tp, "__required_keys__", ())):
                required.add(key)
        self.hints = {k: (get_args(h)[0] if get_origin(h) in (Required, NotRequired) else h)
                      for k, h in hints.items()}
        self.required = frozenset(required)
        self.declared = frozenset(hints)


def _union(a: Any, b: Any) -> Any:
    return a | b


def _maybe_keyed_union(tp: Any) -> Callable[[str | bytes], Any] | None:
    args = get_args(tp)
    members = [_Member(a) for a in args if is_typeddict(a)]
    others = [a for a in args if not is_typeddict(a)]
    if len(members) < 2:
        return None
    fields: dict[str, Any] = {}
    for member in members:
        for key, hint in member.hints.items():
            fields[key] = hint if key not in fields or fields[key] == hint else fields[key] | hint
    title = "_".join(member.tp.__name__ for member in members)
    make_typeddict: Any = TypedDict  # the functional form, with keys only known at run time
    merged = make_typeddict(f"_Keys_{title}", fields, total=False)
    try:
        decode = msgspec.json.Decoder(reduce(_union, [merged, *others])).decode
    except TypeError:
        return None
    return _KeyedUnion(decode, members, fields).decode


@final
class _KeyedUnion:
    """Decodes a union of TypedDicts told apart by which keys are present (TRD's ``progress``)."""

    __slots__ = ("_fields", "_members", "_memo", "_names", "decode")

    def __init__(self, decode: Callable[[str | bytes], Any], members: list[_Member],
                 fields: dict[str, Any]) -> None:
        self._members = members
        self._fields = fields
        self._names = " | ".join(m.tp.__name__ for m in members)
        # The keys as they arrived -> None when the object is valid as decoded (the merged decoder
        # checked each key with exactly the picked member's type), else the member types to
        # re-validate against in turn (an empty tuple when no member fits the keys).
        self._memo: dict[tuple[str, ...], tuple[Any, ...] | None] = {}
        self.decode = self._closure(decode)

    def _plan(self, arrived: tuple[str, ...]) -> tuple[Any, ...] | None:
        keys = frozenset(arrived)
        fits = [m for m in self._members if m.required <= keys <= m.declared]
        exact = bool(fits) and all(self._fields[k] == fits[0].hints[k] for k in keys)
        plan = None if exact else tuple(m.tp for m in fits)
        if len(self._memo) < _MAX_KEYSET_MEMO:
            self._memo[arrived] = plan
        return plan

    def _closure(self, merged: Callable[[str | bytes], Any]) -> Callable[[str | bytes], Any]:
        # A closure over locals: the hot path does no attribute lookups (a stream of progress
        # events spends most of its decode time here).
        memo_get = self._memo.get
        plan_for = self._plan
        names = self._names
        unknown: Any = object()  # marks a memo miss

        def decode(raw: str | bytes) -> Any:
            decoded: Any = merged(raw)
            if decoded.__class__ is not dict:  # (not type(): pyright would narrow to Unknowns)
                return decoded  # a non-object member (None, a list...), already validated
            obj: dict[str, Any] = decoded
            arrived = tuple(obj)
            plan = memo_get(arrived, unknown)
            if plan is unknown:
                plan = plan_for(arrived)
            if plan is None:
                return obj
            for check in plan:
                try:
                    return msgspec.convert(obj, check)
                except msgspec.ValidationError:
                    continue
            raise msgspec.ValidationError(
                f"an object with keys {sorted(arrived)} matches no member of {names}: "
                "a member's required keys must all be present, and no key of another member")

        return decode


@final
class Message(msgspec.Struct, Generic[C_contra, T], frozen=True):
    """One event with its payload, ready to send: built by ``Chat.chunk({"chunk": "hi"})``."""

    event: BoundEvent[C_contra, T]
    data: T

    @property
    def name(self) -> str:
        """The wire name (SSE ``event:`` field)."""
        return self.event.name

    def encode(self) -> bytes:
        """The payload's compact JSON."""
        return self.event.encode(self.data)


def is_event(msg: Message[C, Any], event: BoundEvent[Any, T]) -> TypeGuard[Message[C, T]]:
    """True if ``msg`` is ``event``'s message; narrows ``msg.data`` to that event's payload."""
    return msg.event is event

