"""Build frozen option dataclasses from plain data, with errors that name the file and key."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, TypeVar, get_args, get_origin

T = TypeVar("T")
PAIR_FORMS = "write [pattern, value] or {pattern: value} (a list of either, or one mapping of them all)"
"""The spellings accepted for a (pattern, value) record, named in errors."""


class ConfigError(ValueError):
    """A configuration problem, worded for the user: where it is and what was expected."""

    def __init__(self, source: str, key: str, message: str) -> None:
        self.source, self.key, self.detail = source, key, message
        super().__init__(f"{source}: {key}: {message}" if key else f"{source}: {message}")


def build(cls: type[T], data: Any, *, source: str, path: str = "") -> T:
    """Turn a mapping into ``cls`` (a dataclass), checking keys, types and each class's ``check``."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, path or "(top level)", f"expected a mapping, got {_kind(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        key = _join(path, str(unknown[0]))
        raise ConfigError(source, key, f"unknown key; expected one of: {', '.join(sorted(fields))}")
    values = {name: _coerce(hints[name], data[name], source, _join(path, name)) for name in data}
    try:
        obj = cls(**values)
    except ValueError as exc:  # a section that checks itself in __post_init__
        raise ConfigError(source, path or "(top level)", str(exc)) from None
    check = getattr(obj, "check", None)
    if check is not None:
        try:
            check()
        except ValueError as exc:
            raise ConfigError(source, path or "(top level)", str(exc)) from None
    return obj


def to_data(obj: Any) -> Any:
    """The inverse of ``build``: plain dicts, lists and scalars (for printing the effective config)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_data(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_data(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_data(v) for k, v in obj.items()}
    return obj


def _coerce(tp: Any, value: Any, source: str, key: str) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                return _coerce(option, value, source, key)
            except ConfigError as exc:
                errors.append(str(exc).rsplit(": ", 1)[-1])
        raise ConfigError(source, key, " or ".join(errors))
    if origin is Literal:
        if isinstance(value, bool) and ("on" if value else "off") in args:
            value = "on" if value else "off"  # YAML 1.1 reads an unquoted off / on as a boolean
        if value not in args:
            raise ConfigError(source, key, f"expected one of {', '.join(map(repr, args))}, got {value!r}")
        return value
    if origin in (tuple, list):
        if args and args[-1] is not Ellipsis and origin is tuple:  # a fixed record such as (pattern, tokens)
            if len(args) == 2 and isinstance(value, dict):
                if len(value) != 1:
                    raise ConfigError(source, key, f"expected a mapping of one pattern to its value, got {len(value)} keys; {PAIR_FORMS}")
                value = next(iter(value.items()))  # {pattern: value}, as in a list of one-key maps
            if not isinstance(value, (list, tuple)) or len(value) != len(args):
                expected = PAIR_FORMS if len(args) == 2 else f"expected a list of {len(args)} items"
                raise ConfigError(source, key, f"{expected}, got {value!r}")
            return tuple(_coerce(t, v, source, f"{key}[{i}]") for i, (t, v) in enumerate(zip(args, value)))
        item = args[0] if args else Any
        if isinstance(value, dict) and get_origin(item) is tuple and len(get_args(item)) == 2:
            value = list(value.items())  # {pattern: value} is the friendly spelling of [[pattern, value], ...]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(source, key, f"expected a list, got {_kind(value)}")
        return tuple(_coerce(item, v, source, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(source, key, f"expected a mapping, got {_kind(value)}")
        key_type, item = args if args else (str, Any)
        return {_coerce(key_type, k, source, key): _coerce(item, v, source, _join(key, str(k))) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return build(tp, value, source=source, path=key)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(source, key, f"expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(source, key, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(source, key, f"expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(source, key, f"expected a string, got {_kind(value)}")
        return value
    raise ConfigError(source, key, f"unsupported option type {tp!r}")  # pragma: no cover


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string"}.get(type(value), repr(value))
