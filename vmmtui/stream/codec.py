"""Dataclasses to JSON-ready values and back, driven by their type hints.

Events, step reports and wire messages are dataclasses; this is the one place that turns them into
plain dicts and lists and back into equal objects, checking types on the way in, so nothing read
from a worker, a peer or a recording is trusted by key.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum
from functools import cache
from typing import Any, TypeVar, Union

T = TypeVar("T")


class DecodeError(ValueError):
    """The data does not have the shape the type asks for; the message names the path."""


#: the types that are their own JSON value (``type(v) in``: an enum, a str subclass, is not)
_PLAIN = frozenset({str, int, float, bool, type(None)})
#: each dataclass type's field names, looked up once (``dataclasses.fields`` each time cost more
#: than the rest of an event's encoding); None: not a dataclass
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def encode(value: Any) -> Any:
    """A dataclass (nested, in lists, dicts, tuples) as plain JSON-ready values. A trace encodes
    tens of thousands of events a second: a plain value returns at once, and a dataclass's field
    names are read once per type."""
    cls = value.__class__
    if cls in _PLAIN:
        return value
    try:
        names = _FIELDS[cls]
    except KeyError:
        names = _FIELDS[cls] = (
            tuple(f.name for f in dataclasses.fields(value))
            if dataclasses.is_dataclass(value) and not isinstance(value, type)
            else None
        )
    if names is not None:
        out = {}
        for name in names:
            v = getattr(value, name)
            out[name] = v if v.__class__ in _PLAIN else encode(v)
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [v if v.__class__ in _PLAIN else encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def warm(*samples: Any) -> None:
    """Decode one sample of each message type now, through JSON, so that the first real message does
    not pay for resolving the type hints and the first runs of the decoder (0.1-0.3 ms a type, once a
    process), which otherwise land inside a timed step (the consumer's receive, the producer's
    wait_ack)."""
    import json

    for sample in samples:
        decode(type(sample), json.loads(json.dumps(encode(sample))))


def decode(tp: Any, data: Any, path: str = "$") -> Any:
    """``data`` (from JSON) as an instance of ``tp``; DecodeError when its shape is wrong."""
    if tp is Any:
        return data
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return decode(arg, data, path)
            except DecodeError as exc:
                errors.append(str(exc))
        raise DecodeError("; ".join(errors) or f"{path}: unexpected {type(data).__name__}")
    if origin in (list, tuple):
        if not isinstance(data, list | tuple):
            raise DecodeError(f"{path}: expected a list, got {type(data).__name__}")
        args = typing.get_args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(data):
                raise DecodeError(f"{path}: expected {len(args)} items, got {len(data)}")
            return tuple(
                decode(a, v, f"{path}[{i}]")
                for i, (a, v) in enumerate(zip(args, data, strict=True))
            )
        item = args[0] if args else Any
        out = [decode(item, v, f"{path}[{i}]") for i, v in enumerate(data)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(data, dict):
            raise DecodeError(f"{path}: expected an object, got {type(data).__name__}")
        kt, vt = typing.get_args(tp) or (str, Any)
        return {_key(kt, k, path): decode(vt, v, f"{path}.{k}") for k, v in data.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise DecodeError(
                f"{path}: expected an object for {tp.__name__}, got {type(data).__name__}"
            )
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = decode(hints[f.name], data[f.name], f"{path}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DecodeError(f"{path}: {tp.__name__} lacks {f.name!r}")
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(data)
        except ValueError as exc:
            raise DecodeError(f"{path}: {exc}") from None
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise DecodeError(f"{path}: expected a number, got {type(data).__name__}")
        return float(data)
    if tp in (int, str, bool):
        if not isinstance(data, tp) or (tp is int and isinstance(data, bool)):
            raise DecodeError(f"{path}: expected {tp.__name__}, got {type(data).__name__}")
        return data
    if tp is type(None):
        if data is not None:
            raise DecodeError(f"{path}: expected null")
        return None
    raise DecodeError(f"{path}: cannot decode into {tp!r}")


def _key(tp: Any, key: Any, path: str) -> Any:
    """A JSON object's key (always a string) as the dict's key type: JSON has no int keys, so
    ``encode`` wrote ``str(k)`` and this reads back the integer (decimal digits only)."""
    if tp is int:
        text = key if isinstance(key, str) else ""
        digits = text[1:] if text.startswith("-") else text
        if not (digits.isascii() and digits.isdigit()):
            raise DecodeError(f"{path}: key {key!r:.40} is not an integer")
        try:
            return int(text)
        except ValueError:  # more digits than int() takes from a string
            raise DecodeError(f"{path}: key {key!r:.40} is not an integer") from None
    if tp is str or tp is Any:
        if not isinstance(key, str):
            raise DecodeError(f"{path}: key {key!r:.40} is not a string")
        return key
    return decode(tp, key, f"{path} key")


def roundtrip(value: T) -> T:
    """``value`` through JSON-ready values and back (tests use it)."""
    return decode(type(value), encode(value))
