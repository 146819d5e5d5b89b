"""glueinfo.core.records.dataclass makes the class dataclasses.dataclass makes: each shape glueinfo
uses is made both ways and used alike (construction, defaults, repr, equality, hashing, frozen
fields, fields/replace/asdict, pattern matching, copies and pickles)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

import pytest

from glueinfo.core.records import dataclass as record

DECORATORS = {"dataclass": dataclass, "record": record}


def shapes(decorate: Any, suffix: str) -> dict[str, type]:
    """The same class definitions, made by ``decorate``; module-level names so that pickle finds them."""

    @decorate
    class Plain:
        """Fields, a default, default factories."""

        name: str
        size: Optional[int] = None
        tags: list[str] = field(default_factory=list)
        extra: dict[str, Any] = field(default_factory=dict)

    @decorate(frozen=True)
    class Frozen:
        """Frozen, one field left out of comparison and repr."""

        key: str
        value: float = 0.0
        note: str = field(default="", compare=False, repr=False)
        parts: tuple[str, ...] = ()
        kind: ClassVar[str] = "frozen"

    @decorate(frozen=True)
    class Single:
        """One field."""

        value: float

    @decorate
    class Empty:
        """No fields."""

    @decorate(slots=True)
    class Slotted:
        """Slots."""

        a: int
        b: int = 2

    @decorate(frozen=True)
    class OwnMethods:
        """Its own __eq__, __hash__ and __repr__ are kept."""

        a: int
        b: int = 0

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnMethods) and self.a == other.a

        def __hash__(self) -> int:
            return hash(self.a)

        def __repr__(self) -> str:
            return f"<{self.a}>"

    @decorate
    class OwnEq:
        """Its own __eq__ (Python sets __hash__ None beside it)."""

        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnEq) and self.a == other.a

    @decorate
    class WithPostInit:
        """__post_init__: @dataclass's own __init__ is used."""

        a: int
        doubled: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            self.doubled = self.a * 2

    @decorate(frozen=True)
    class Child(Frozen):
        """A dataclass base."""

        more: int = 1

    class SlotBase:
        """Not a dataclass: a slot that a frozen field of the same name is stored in."""

        __slots__ = ("a",)

    @decorate(frozen=True)
    class OverSlot(SlotBase):
        """Frozen, one field in a base's slot."""

        a: int
        b: int = 0

    made = {"Plain": Plain, "Frozen": Frozen, "Single": Single, "Empty": Empty, "Slotted": Slotted,
            "OwnMethods": OwnMethods, "OwnEq": OwnEq, "WithPostInit": WithPostInit, "Child": Child, "OverSlot": OverSlot}
    for name, cls in made.items():
        cls.__qualname__ = cls.__name__ = f"{name}_{suffix}"
        globals()[cls.__qualname__] = cls
    return made


BOTH = {name: shapes(decorate, name) for name, decorate in DECORATORS.items()}


def each(name: str) -> tuple[type, type]:
    return BOTH["dataclass"][name], BOTH["record"][name]


def same_repr(made: object, reference: object) -> None:
    assert repr(made).replace("_record", "_dataclass") == repr(reference)


def test_construction_and_defaults_are_the_same():
    reference, made = each("Plain")
    for args, kwargs in (((), {"name": "a"}), (("a", 3), {}), (("a",), {"tags": ["x"], "extra": {"k": 1}})):
        assert dataclasses.asdict(made(*args, **kwargs)) == dataclasses.asdict(reference(*args, **kwargs))
    first, second = made("a"), made("b")
    assert first.tags == [] and first.tags is not second.tags  # a fresh list for each
    assert str(inspect.signature(made)) == str(inspect.signature(reference))
    assert made.__init__.__annotations__ == reference.__init__.__annotations__
    assert made.__match_args__ == reference.__match_args__ == ("name", "size", "tags", "extra")
    for bad in ((), ("a", 1, [], {}, "too many")):
        with pytest.raises(TypeError):
            made(*bad)
    with pytest.raises(TypeError):
        made("a", colour="red")


def test_repr_is_the_same_text():
    for name, args in (("Plain", ("a", 1, ["x"])), ("Frozen", ("k", 1.5, "hidden", ("p",))), ("Single", (2.0,)),
                       ("Empty", ()), ("Slotted", (1,)), ("OwnMethods", (1,)), ("Child", ("k",))):
        reference, made = each(name)
        same_repr(made(*args), reference(*args))


def test_a_record_holding_itself_shows_dots_as_a_dataclass_does():
    reference, made = each("Plain")
    loop, reference_loop = made("a"), reference("a")
    loop.extra["self"], reference_loop.extra["self"] = loop, reference_loop
    same_repr(loop, reference_loop)
    assert "..." in repr(loop)


def test_equality_is_the_same():
    for name, a, b in (("Plain", ("a", 1), ("a", 2)), ("Frozen", ("k", 1.0), ("k", 2.0)), ("Single", (1.0,), (2.0,)),
                       ("Slotted", (1,), (3,)), ("Child", ("k",), ("j",))):
        reference, made = each(name)
        assert made(*a) == made(*a) and made(*a) != made(*b)
        assert (made(*a) == made(*b)) == (reference(*a) == reference(*b))
        assert made(*a).__eq__(reference(*a)) is NotImplemented  # another class, even with the same fields
    reference, made = each("Frozen")
    assert made("k", 1.0, "one note") == made("k", 1.0, "another")  # compare=False
    nan = float("nan")  # the same NaN object: equal inside a tuple of fields, as @dataclass compares them
    reference_single, single = each("Single")
    assert (single(nan) == single(nan)) is (reference_single(nan) == reference_single(nan)) is True
    assert (single(nan) == single(float("nan"))) is (reference_single(nan) == reference_single(float("nan"))) is False
    assert each("Empty")[1]() == each("Empty")[1]()


def test_hashing_is_the_same():
    for name, args in (("Frozen", ("k", 1.0, "n", ("p",))), ("Single", (2.5,)), ("Empty", ())):
        reference, made = each(name)
        if name == "Empty":  # mutable: unhashable, as @dataclass makes it
            with pytest.raises(TypeError):
                hash(made())
            continue
        assert hash(made(*args)) == hash(reference(*args))
    made = each("Frozen")[1]
    assert hash(made("k", 1.0, "n")) == hash(made("k", 1.0, "other note"))  # compare=False: not hashed either
    assert {made("k"): 1}[made("k")] == 1
    reference, made = each("Plain")
    with pytest.raises(TypeError, match="unhashable"):
        hash(made("a"))
    reference, made = each("OwnMethods")
    assert made(1, 2) == made(1, 3) and hash(made(1, 2)) == hash(1) and repr(made(1)) == "<1>"
    reference, made = each("OwnEq")
    assert made(1) == made(1)
    with pytest.raises(TypeError):
        hash(made(1))
    with pytest.raises(TypeError):
        hash(reference(1))


def test_frozen_fields_cannot_be_changed():
    actions = (lambda obj: setattr(obj, "key", "other"), lambda obj: setattr(obj, "unknown", 1),
               lambda obj: delattr(obj, "value"))
    for name in ("Frozen", "Child"):
        reference, made = each(name)
        for action in actions:
            value, reference_value = made("k"), reference("k")
            with pytest.raises(dataclasses.FrozenInstanceError) as raised:
                action(value)
            with pytest.raises(dataclasses.FrozenInstanceError) as reference_raised:
                action(reference_value)
            assert str(raised.value) == str(reference_raised.value)
            assert value == made("k") and value.key == "k"


def test_fields_replace_asdict_copy_and_pickle_take_it():
    reference, made = each("Frozen")
    value = made("k", 1.0, "n", ("p",))
    assert [f.name for f in dataclasses.fields(made)] == [f.name for f in dataclasses.fields(reference)]
    assert dataclasses.is_dataclass(made) and dataclasses.is_dataclass(value)
    changed = dataclasses.replace(value, value=2.0)
    assert changed == made("k", 2.0, "", ("p",)) and changed.note == "n" and value.value == 1.0
    assert dataclasses.asdict(value) == dataclasses.asdict(reference("k", 1.0, "n", ("p",)))
    assert dataclasses.astuple(value) == ("k", 1.0, "n", ("p",))
    for again in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
        assert again == value and again.note == "n"
        with pytest.raises(dataclasses.FrozenInstanceError):
            again.key = "other"
    plain = each("Plain")[1]("a", 1, ["x"])
    assert pickle.loads(pickle.dumps(plain)) == plain


def test_pattern_matching_takes_it():
    made = each("Plain")[1]
    match made("a", 5):
        case made(name, size) if size == 5:  # type: ignore[misc]
            assert name == "a"
        case _:
            pytest.fail("no match")


def test_classes_outside_the_fast_path_are_made_by_dataclass_alike():
    reference, made = each("WithPostInit")
    assert made(3).doubled == reference(3).doubled == 6
    same_repr(made(3), reference(3))
    reference, made = each("Slotted")
    assert made.__slots__ == reference.__slots__ == ("a", "b")
    with pytest.raises(AttributeError):
        made(1).c = 3
    reference, made = each("Child")
    assert made("k", 1.0, "", (), 5).more == 5 and str(inspect.signature(made)) == str(inspect.signature(reference))


def test_a_default_before_a_field_without_one_is_refused_as_dataclass_refuses_it():
    for decorate in DECORATORS.values():
        with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
            @decorate
            class Bad:
                """Wrong order."""

                a: int = 0
                b: int


def test_only_frozen_and_slots_are_taken():
    with pytest.raises(TypeError):
        @record(order=True)  # type: ignore[call-overload]
        class Ordered:
            """Not supported."""

            a: int


def test_mixing_frozen_and_mutable_classes_is_refused_as_dataclass_refuses_it():
    for frozen_base, mutable_base in (each("Frozen")[1], each("Plain")[1]), (each("Frozen")[0], each("Plain")[0]):
        for decorate in DECORATORS.values():
            with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
                decorate(type("Sub", (frozen_base,), {"__doc__": "mutable over frozen", "__annotations__": {"x": int},
                                                      "x": 0}))
            with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):
                decorate(frozen=True)(type("Sub", (mutable_base,), {"__doc__": "frozen over mutable"}))


def test_a_class_not_yet_instantiated_shows_its_signature():
    made, reference = shapes(record, "unused")["Frozen"], BOTH["dataclass"]["Frozen"]
    assert str(inspect.signature(made)) == str(inspect.signature(reference))  # as help() shows it
    assert made("k", 2.0).value == 2.0


def test_methods_are_compiled_when_first_used():
    made = shapes(record, "fresh")  # no instance made, no comparison yet
    assert not any(inspect.isfunction(vars(cls)["__init__"]) for name, cls in made.items()
                   if name in ("Plain", "Frozen", "Single", "Empty", "OwnEq"))  # stand-ins
    assert inspect.isfunction(vars(made["Slotted"])["__init__"])  # outside the fast path: dataclass's, made with the class
    plain, frozen, single = made["Plain"], made["Frozen"], made["Single"]
    plain("a")
    assert inspect.isfunction(vars(plain)["__init__"])  # compiled at the first instance, kept on the class
    assert plain.__repr__.__code__ is frozen.__repr__.__code__  # shared functions
    assert frozen.__setattr__.__code__ is single.__setattr__.__code__
    stand_in = frozen.__eq__
    assert stand_in.__code__ is plain.__eq__.__code__ and frozen.__hash__.__code__ is single.__hash__.__code__
    assert frozen("k") == frozen("k") and hash(frozen("k")) == hash(frozen("k"))
    assert frozen.__eq__ is not stand_in and frozen.__eq__.__code__ is not plain.__eq__.__code__  # its own now
    assert frozen("k") != frozen("j") and frozen("k").__eq__(each("Frozen")[0]("k")) is NotImplemented
    assert BOTH["dataclass"]["Plain"].__eq__.__code__ is not BOTH["dataclass"]["Frozen"].__eq__.__code__


def test_frozen_fields_are_stored_where_dataclass_stores_them():
    for name, args, stored in (("Frozen", ("k", 1.0, "n"), {"key": "k", "value": 1.0, "note": "n", "parts": ()}),
                               ("OverSlot", (1,), {"b": 0})):  # a in the base's slot, b in the instance's dict
        reference, made = each(name)
        assert vars(made(*args)) == vars(reference(*args)) == stored
    assert each("OverSlot")[1](1).a == 1


@pytest.mark.parametrize("evaluated", [True, False], ids=["annotations", "annotation strings"])
def test_keyword_only_and_init_only_fields_are_taken_as_dataclass_takes_them(evaluated):
    def shape(annotations):
        return {"__doc__": "Keyword-only and init-only fields.", "b": 0, "__annotations__": annotations,
                "__post_init__": lambda self, scale: setattr(self, "a", self.a * scale)}

    kinds = {"a": int, "scale": dataclasses.InitVar[int], "_": dataclasses.KW_ONLY, "b": int}
    annotations = kinds if evaluated else {name: "dataclasses.InitVar[int]" if name == "scale" else
                                           "dataclasses.KW_ONLY" if name == "_" else "int" for name in kinds}
    reference, made = (decorate(type(f"KeywordOnly_{name}", (), shape(annotations))) for name, decorate in DECORATORS.items())
    for cls in (reference, made):
        value = cls(2, 3, b=5)
        assert (value.a, value.b) == (6, 5) and [f.name for f in dataclasses.fields(cls)] == ["a", "b"]
        with pytest.raises(TypeError):
            cls(2, 3, 5)
