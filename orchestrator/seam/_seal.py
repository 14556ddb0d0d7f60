"""The private token only the seam holds, and what the sealed classes refuse at run time.

A sealed constructor refuses anything but `SEAL`. What a constructor cannot see is closed
here: `sealed_class` makes a class refuse subclasses, copies, pickles and `cls.__new__`
without the token, and `vouch` records every object a sealed constructor finished, by
identity, so `vouched` tells the genuine object from one forged around its constructor
(`object.__new__`, a `__class__` swapped in, state set from a forged pickle).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Final, NoReturn, TypeVar

from orchestrator.errors import SealViolation

SEAL: Final = object()

_Class = TypeVar("_Class", bound=type)
# id -> a weak reference to the object minted there; an entry leaves with its object.
_MINTED: Final[dict[int, weakref.ref[object]]] = {}


def vouch(minted: object) -> None:
    """Record `minted` as made by its sealed constructor (call it last in the constructor)."""
    key = id(minted)

    def forget(ref: weakref.ref[object]) -> None:
        if _MINTED.get(key) is ref:
            del _MINTED[key]

    _MINTED[key] = weakref.ref(minted, forget)


def vouched(candidate: object) -> bool:
    """Return whether `candidate` is itself an object a sealed constructor finished."""
    ref = _MINTED.get(id(candidate))
    return ref is not None and ref() is candidate


def sealed_class(kind: str) -> Callable[[_Class], _Class]:
    """Make the decorated class refuse subclasses, copies, pickles and `__new__` without `SEAL`.

    Apply it above `@dataclass`, which builds a new class for `slots=True`.
    """

    def refuse(what: str) -> Callable[..., NoReturn]:
        def refused(*args: object, **kwargs: object) -> NoReturn:
            raise SealViolation(f"{kind} ({what})")

        return refused

    def seal(cls: _Class) -> _Class:
        def new(klass: type, /, *args: object, seal: object = None, **kwargs: object) -> object:
            if seal is not SEAL:
                raise SealViolation(kind)
            return object.__new__(klass)

        def init_subclass(klass: type, /, **kwargs: object) -> NoReturn:
            raise SealViolation(f"{kind} (a subclass)")

        cls.__new__ = staticmethod(new)  # type: ignore[assignment]
        cls.__init_subclass__ = classmethod(init_subclass)  # type: ignore[assignment]
        for name in ("__reduce__", "__reduce_ex__", "__copy__", "__deepcopy__", "__setstate__", "__replace__"):
            setattr(cls, name, refuse(f"{name}, a copy or a pickle"))
        return cls

    return seal
