"""``dataclass``: ``dataclasses.dataclass`` for glueinfo's classes, cheaper to make at import.

This ``@dataclass``, ``@dataclass(frozen=True)`` and ``@dataclass(slots=True)`` make the class
the standard library's makes with those arguments: the same ``__init__`` (fields in order,
defaults, ``field(default_factory=...)``), the same ``__repr__`` text, ``__eq__``
(same class, fields with ``compare`` equal), ``__hash__`` (a frozen class hashes its
compared fields; a mutable one is unhashable; one the class defines itself is kept,
as are its own ``__repr__`` and ``__eq__``), ``FrozenInstanceError`` on assigning to
or deleting a field of a frozen one, ``__match_args__``; and ``dataclasses.fields``,
``replace``, ``asdict`` and ``is_dataclass`` take it.  For mypy it *is*
``dataclasses.dataclass``.  Only ``frozen`` and ``slots`` are taken: any other argument is a
TypeError when the class is made.

Why: on Python 3.11 ``@dataclass`` compiles each generated method separately (the
source text of ``__init__``, ``__repr__``, ``__eq__``, and for a frozen class
``__hash__``, ``__setattr__`` and ``__delattr__``), 0.3-0.6 ms a class, and a
one-host ``glueinfo ldif`` makes some eighty classes before it prints anything (issue
24's start-up ratios), some of them only types there.  Here nothing is compiled with the
class.  ``__init__`` is compiled when the class is first asked for it (an instance made,
``inspect.signature`` or ``help()``), and is as fast as ``@dataclass``'s (a frozen one's
faster); ``__eq__`` and ``__hash__`` are compiled as ``@dataclass`` writes them when first
called; each is then kept on the class in place of the stand-in that compiled it.
``__repr__`` (slower per call: messages and debugging use it) and the frozen guards are
shared functions closed over the class's field names.  Where the fast path does not
apply (slots, a dataclass base, a field outside ``__init__`` or keyword-only,
``InitVar``, ``__post_init__``, a class's own ``__init__``, ``__setattr__`` or
``__delattr__``, no docstring), ``@dataclass`` makes ``__init__`` and the frozen guards
with the class, as usual.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional

__all__ = ["dataclass"]

_MISSING = dataclasses.MISSING


class _Factory:
    """The default of a ``default_factory`` field's ``__init__`` parameter: "make one"."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


class _FrozenParameters:
    """Made once, for its ``__dataclass_params__``: what a frozen class on the fast path
    carries, since ``@dataclass`` reads it to refuse a mutable subclass of a frozen class
    and a frozen subclass of a mutable one."""


_FROZEN_PARAMETERS = dataclasses.dataclass(_FrozenParameters, init=False, repr=False, eq=False,
                                           frozen=True).__dataclass_params__  # type: ignore[attr-defined]


def _plain(cls: type) -> bool:
    """Whether ``__init__`` and the frozen guards can be made here: nothing of a dataclass's
    that changes them (see the module doc)."""
    body = cls.__dict__
    if any(name in body for name in ("__init__", "__setattr__", "__delattr__")) or hasattr(cls, "__post_init__"):
        return False
    if not body.get("__doc__"):  # @dataclass writes one from the signature of its __init__
        return False
    if any("__dataclass_fields__" in base.__dict__ for base in cls.__mro__[1:]):
        return False
    for name, annotation in body.get("__annotations__", {}).items():
        if isinstance(annotation, str):
            if "InitVar" in annotation or "KW_ONLY" in annotation:
                return False
        elif annotation is dataclasses.KW_ONLY or annotation is dataclasses.InitVar or isinstance(annotation, dataclasses.InitVar):
            return False
        if name == "self" or name.startswith("__record_"):
            return False
        value = body.get(name)
        if isinstance(value, dataclasses.Field) and (not value.init or value.kw_only is True):
            return False
    return True


def _add_init(cls: type, fields: tuple[dataclasses.Field[Any], ...], frozen: bool) -> None:
    """``cls.__init__`` as ``@dataclass`` writes it (a frozen class sets its fields past
    its own guard), compiled when first asked for (:class:`_InitOnFirstUse`).  TypeError,
    as ``@dataclass`` raises it, for a field without a default after one with a default."""
    names: dict[str, Any] = {"__record_factory__": _FACTORY, "__record_set__": object.__setattr__}
    parameters, values, defaults = [], [], []
    for index, f in enumerate(fields):
        value = f.name
        if f.default is not _MISSING:
            defaults.append(f.default)
        elif f.default_factory is not _MISSING:
            defaults.append(_FACTORY)
            names[f"__record_factory{index}__"] = f.default_factory
            value = f"__record_factory{index}__() if {f.name} is __record_factory__ else {f.name}"
        elif defaults:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        parameters.append(f.name)
        values.append((f.name, value))
    if not values:
        body = " pass"
    elif not frozen:
        body = "\n".join(f" self.{name} = {value}" for name, value in values)
    elif _in_instance_dict(cls, fields):
        # What object.__setattr__ field by field does here, in one call: about half the source to
        # compile for a frozen class, and no slower per instance.
        body = " self.__dict__.update(" + ", ".join(f"{name}={value}" for name, value in values) + ")"
    else:
        body = "\n".join(f" __record_set__(self, {name!r}, {value})" for name, value in values)
    source = f"def __init__(self, {', '.join(parameters)}):\n{body}"
    annotations = {**{f.name: f.type for f in fields}, "return": None}
    cls.__init__ = _InitOnFirstUse(cls, source, names, tuple(defaults) or None, annotations)  # type: ignore[misc]


class _InitOnFirstUse:
    """A class's ``__init__`` until anything asks the class for it: making an instance,
    ``inspect.signature`` or ``help()`` of the class.  Then the function is compiled, put on
    the class in this stand-in's place, and given: a class never instantiated (many are only
    types on a command's path) never compiles it.  Two threads asking at once compile it
    twice, alike."""

    __slots__ = ("cls", "source", "names", "defaults", "annotations")

    def __init__(self, cls: type, source: str, names: dict[str, Any], defaults: Optional[tuple[Any, ...]],
                 annotations: dict[str, Any]) -> None:
        self.cls, self.source, self.names, self.defaults, self.annotations = cls, source, names, defaults, annotations

    def __get__(self, instance: Any, owner: Optional[type] = None) -> Any:
        namespace = dict(self.names)
        exec(self.source, namespace)
        init = namespace["__init__"]
        init.__defaults__ = self.defaults
        init.__qualname__ = f"{self.cls.__qualname__}.__init__"
        init.__annotations__ = self.annotations
        self.cls.__init__ = init  # type: ignore[misc]
        return init if instance is None else init.__get__(instance, owner)


def _in_instance_dict(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> bool:
    """Whether ``object.__setattr__`` puts each field in the instance's ``__dict__``: the class has
    one (no ``__slots__`` of its own) and no field name is a data descriptor on it (a base's slot
    or property, a default with ``__set__``)."""
    if "__slots__" in cls.__dict__:
        return False
    return not any(hasattr(type(getattr(cls, f.name, None)), "__set__") for f in fields)


def _add_frozen_guards(cls: type[Any], fields: tuple[dataclasses.Field[Any], ...]) -> None:
    """``__setattr__`` and ``__delattr__`` that refuse a field (any attribute of the class itself)."""
    guarded = frozenset(f.name for f in fields)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in guarded:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in guarded:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for method in (__setattr__, __delattr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        setattr(cls, method.__name__, method)


def _add_repr(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> None:
    shown = tuple(f.name for f in fields if f.repr)

    def __repr__(self: Any) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{name}={getattr(self, name)!r}' for name in shown)})"

    __repr__.__qualname__ = f"{cls.__qualname__}.__repr__"
    cls.__repr__ = reprlib.recursive_repr()(__repr__)  # type: ignore[assignment,method-assign]  # "..." inside itself


def _fields_tuple(owner: str, names: tuple[str, ...]) -> str:
    return "(" + "".join(f"{owner}.{name}," for name in names) + ")"


def _compiled(cls: type, method: str, source: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    function: Callable[..., Any] = namespace[method]
    function.__qualname__ = f"{cls.__qualname__}.{method}"
    return function


# __eq__ and __hash__ run often on some classes (snapshots compared, ids in sets) and never on most:
# each is compiled as @dataclass writes it (the fields' tuple built inline, a third faster per call
# than a shared function taking them) when first called, and kept on the class in place of the
# stand-in that compiled it.  Before and after, the class compares and hashes alike.

def _add_eq(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> None:
    names = tuple(f.name for f in fields if f.compare)

    def __eq__(self: Any, other: Any) -> Any:
        compiled = _compiled(cls, "__eq__", "def __eq__(self, other):\n if other.__class__ is self.__class__:\n"
                                            f"  return {_fields_tuple('self', names)} == {_fields_tuple('other', names)}\n"
                                            " return NotImplemented")
        cls.__eq__ = compiled  # type: ignore[method-assign]
        return compiled(self, other)

    __eq__.__qualname__ = f"{cls.__qualname__}.__eq__"
    cls.__eq__ = __eq__  # type: ignore[assignment,method-assign]


def _add_hash(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> None:
    names = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))

    def __hash__(self: Any) -> int:
        compiled = _compiled(cls, "__hash__", f"def __hash__(self):\n return hash({_fields_tuple('self', names)})")
        cls.__hash__ = compiled  # type: ignore[method-assign]
        result: int = compiled(self)
        return result

    __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
    cls.__hash__ = __hash__  # type: ignore[assignment,method-assign]


def _make(cls: type, frozen: bool, slots: bool) -> type:
    body = cls.__dict__
    # As @dataclass decides it: a __hash__ of the class's own, not the None Python sets beside an __eq__.
    own_hash = body.get("__hash__", _MISSING)
    has_own_hash = not (own_hash is _MISSING or (own_hash is None and "__eq__" in body))
    has_own_repr, has_own_eq = "__repr__" in body, "__eq__" in body
    fast = not slots and _plain(cls)
    made: type[Any]
    if fast:
        made = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    else:
        made = dataclasses.dataclass(cls, repr=False, eq=False, frozen=frozen, slots=slots)
    fields = dataclasses.fields(made)
    if fast:
        _add_init(made, fields, frozen)
        if frozen:
            _add_frozen_guards(made, fields)
            made.__dataclass_params__ = _FROZEN_PARAMETERS
    if not has_own_repr:
        _add_repr(made, fields)
    if not has_own_eq:
        _add_eq(made, fields)
    if not has_own_hash:
        if frozen:
            _add_hash(made, fields)
        else:
            made.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value: unhashable
    return made


if TYPE_CHECKING:  # for mypy, the standard library's
    from dataclasses import dataclass
else:

    def dataclass(cls=None, /, *, frozen=False, slots=False):
        """``@dataclass`` or ``@dataclass(frozen=..., slots=...)``: see the module doc."""
        if cls is None:
            return lambda cls: _make(cls, frozen, slots)
        return _make(cls, frozen, slots)
