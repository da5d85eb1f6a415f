"""Mechanism parameters: attrs classes that validate on construction.

A mechanism's ``Params`` is a frozen, keyword-only attrs class, usually a subclass of
:class:`PrivacyParams` (which holds ``epsilon`` and ``delta``). Declare each field with
:func:`param` so that ``dpframe describe`` can show its type, default, constraint and
help, and so that the CLI can convert ``key=value`` strings to the right type. A bad value
raises :class:`~dpframe.errors.ParameterError` with one sentence, before any data is read.
"""

from __future__ import annotations

import enum
import math
import sys
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import attrs
import numpy as np

from dpframe.errors import ParameterError
from dpframe.releases.jsonable import from_jsonable, to_jsonable

_MISSING = attrs.NOTHING


def param(
    default: Any = _MISSING,
    *,
    help: str,
    constraint: str | None = None,
    validator: Callable[..., None] | list[Callable[..., None]] | None = None,
    converter: Callable[[Any], Any] | None = None,
    factory: Callable[[], Any] | None = None,
    eq: bool = True,
) -> Any:
    """An attrs field with the metadata ``describe`` and the CLI use.

    Pass ``eq=False`` for array-valued fields (arrays have no truth value).
    """
    kwargs: dict[str, Any] = {
        "metadata": {"help": help, "constraint": constraint},
        "validator": validator,
        "converter": converter,
        "kw_only": True,
        "eq": eq,
    }
    if factory is not None:
        kwargs["factory"] = factory
    elif default is not _MISSING:
        kwargs["default"] = default
    return attrs.field(**kwargs)


# -- validators ---------------------------------------------------------------------------


def positive(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """A positive finite number."""
    if not (_is_real(value) and math.isfinite(value) and value > 0):
        raise ParameterError(f"{attribute.name} must be a positive finite number, got {value!r}.")


def nonnegative(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """A finite number >= 0."""
    if not (_is_real(value) and math.isfinite(value) and value >= 0):
        raise ParameterError(f"{attribute.name} must be a finite number >= 0, got {value!r}.")


def probability_open(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """A number strictly between 0 and 1."""
    if not (_is_real(value) and 0 < value < 1):
        raise ParameterError(f"{attribute.name} must lie strictly between 0 and 1, got {value!r}.")


def fraction(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """A number in [0, 1]."""
    if not (_is_real(value) and 0 <= value <= 1):
        raise ParameterError(f"{attribute.name} must lie in [0, 1], got {value!r}.")


def positive_int(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """An integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{attribute.name} must be an integer >= 1, got {value!r}.")


def nonnegative_int(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """An integer >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ParameterError(f"{attribute.name} must be an integer >= 0, got {value!r}.")


def check_memory(entries: float, what: str) -> None:
    """One sentence if ``entries`` values of 8 bytes (an array whose size public parameters
    fix) cannot fit in this machine's memory. Called when planning, so that such a release
    is refused before the ledger charges it, instead of failing with nothing released."""
    need = float(entries) * 8
    have = _physical_memory()
    if have is not None and need > have:
        raise ParameterError(
            f"{what} needs {need / 2**30:,.1f} GiB ({entries:,.0f} values), more than this "
            f"machine's {have / 2**30:,.1f} GiB of memory; lower it."
        )


def _physical_memory() -> int | None:
    """Bytes of physical memory, or ``None`` where the platform does not say."""
    import os

    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def optional(validator: Callable[..., None]) -> Callable[..., None]:
    """``validator`` unless the value is None."""

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is not None:
            validator(instance, attribute, value)

    return check


def one_of(*choices: Any) -> Callable[..., None]:
    """One of the given values."""

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value not in choices:
            options = ", ".join(repr(c) for c in choices)
            raise ParameterError(f"{attribute.name} must be one of {options}, got {value!r}.")

    return check


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _plain_number(value: Any) -> Any:
    """A numpy scalar as the Python number it holds (np.float32(0.5) was refused later,
    by the calibration's float check); anything else unchanged, for the validators."""
    if isinstance(value, (np.integer, np.floating)) and not isinstance(value, np.bool_):
        return value.item()
    return value


def _epsilon(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not (_is_real(value) and math.isfinite(value) and value > 0):
        raise ParameterError(f"epsilon must be a positive finite number, got {value!r}.")
    check_epsilon_scale(value)


def check_epsilon_scale(value: float, name: str = "epsilon") -> None:
    """One sentence for a positive ε so small that its noise scale ``1/ε`` overflows."""
    if 0 < value < 1 / sys.float_info.max:
        raise ParameterError(
            f"{name} {value!r} is too small: its noise scale 1/ε is beyond any floating-point "
            "number."
        )


def _delta(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not (_is_real(value) and 0 <= value < 1):
        raise ParameterError(f"delta must satisfy 0 <= delta < 1, got {value!r}.")


@attrs.frozen(kw_only=True)
class PrivacyParams:
    """The privacy target every mechanism takes: ``epsilon > 0`` and ``0 <= delta < 1``."""

    epsilon: float = param(
        help="privacy loss parameter ε of this release",
        constraint="> 0",
        validator=_epsilon,
        converter=_plain_number,
    )
    delta: float = param(
        0.0,
        help="failure probability δ of this release (0 for pure ε-DP)",
        constraint="0 <= δ < 1",
        validator=_delta,
        converter=_plain_number,
    )


def build(params_class: type, values: Mapping[str, Any]) -> Any:
    """Construct ``params_class(**values)``; unknown or missing names become one sentence."""
    fields = {f.name: f for f in attrs.fields(params_class)}
    unknown = [k for k in values if k not in fields]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], list(fields), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ParameterError(f"unknown parameter {unknown[0]!r}; known: {', '.join(fields)}.{hint}")
    missing = [
        name for name, f in fields.items() if f.default is attrs.NOTHING and name not in values
    ]
    if missing:
        raise ParameterError(f"missing required parameter {missing[0]!r}.")
    hints = typing.get_type_hints(params_class)
    for name, value in values.items():
        _check_literal(name, value, hints.get(name))
    return params_class(**values)


def _check_literal(name: str, value: Any, tp: Any) -> None:
    """One sentence when ``value`` is not among the choices of a ``Literal`` annotation."""
    options = (
        [tp]
        if get_origin(tp) is Literal
        else [a for a in get_args(tp) if get_origin(a) is Literal]
        if get_origin(tp) in (typing.Union, types.UnionType)
        else []
    )
    if not options:
        return
    choices = [c for option in options for c in get_args(option)]
    allows_none = type(None) in get_args(tp)
    if value in choices or (value is None and allows_none):
        return
    if get_origin(tp) in (typing.Union, types.UnionType) and any(
        get_origin(a) is not Literal and a is not type(None) for a in get_args(tp)
    ):
        return  # other (non-literal) alternatives are allowed; their validators decide
    raise ParameterError(
        f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}."
    )


# -- describe ------------------------------------------------------------------------------


def describe_fields(params_class: type) -> list[dict[str, Any]]:
    """For each parameter: name, type, default, constraint and help (JSON-ready)."""
    hints = typing.get_type_hints(params_class)
    out = []
    for f in attrs.fields(params_class):
        default: Any
        if f.default is attrs.NOTHING:
            default = None
            required = True
        else:
            required = False
            default = f.default.factory() if isinstance(f.default, attrs.Factory) else f.default
        out.append(
            {
                "name": f.name,
                "type": type_name(hints.get(f.name, Any)),
                "required": required,
                "default": to_jsonable(default),
                "constraint": f.metadata.get("constraint"),
                "help": f.metadata.get("help", ""),
            }
        )
    return out


def type_name(tp: Any) -> str:
    """A short readable name for a type annotation."""
    origin = get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "None"
    if tp is np.ndarray:
        return "array"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


# -- string coercion (CLI) -------------------------------------------------------------------


def coerce(params_class: type, raw: Mapping[str, str]) -> dict[str, Any]:
    """Convert CLI ``key=value`` strings to the types of ``params_class``'s fields."""
    hints = typing.get_type_hints(params_class)
    fields = {f.name for f in attrs.fields(params_class)}
    out: dict[str, Any] = {}
    for key, text in raw.items():
        if key not in fields:
            out[key] = text  # build() reports it with close matches
            continue
        out[key] = _coerce_value(key, text, hints.get(key, str))
    return out


def _coerce_value(key: str, text: str, tp: Any) -> Any:
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = get_args(tp)
        if type(None) in options and text.strip().lower() in ("none", "null", ""):
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce_value(key, text, option)
            except ParameterError as exc:
                errors.append(str(exc))
        raise ParameterError(errors[0] if errors else f"cannot read {key}={text!r}.")
    if origin is Literal:
        for choice in get_args(tp):
            if str(choice) == text:
                return choice
        options = ", ".join(repr(c) for c in get_args(tp))
        raise ParameterError(f"{key} must be one of {options}, got {text!r}.")
    if tp is bool:
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ParameterError(f"{key} must be true or false, got {text!r}.")
    if tp is int:
        try:
            return int(text)
        except ValueError:
            raise ParameterError(f"{key} must be an integer, got {text!r}.") from None
    if tp is float:
        try:
            return float(text)
        except ValueError:
            raise ParameterError(f"{key} must be a number, got {text!r}.") from None
    if tp is np.ndarray:
        return load_array(key, text)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(text)
        except ValueError:
            options = ", ".join(repr(m.value) for m in tp)
            raise ParameterError(f"{key} must be one of {options}, got {text!r}.") from None
    if get_origin(tp) in (tuple, list):
        parts = [p for p in text.split(",") if p.strip()]
        (inner, *_) = get_args(tp) or (str,)
        return tuple(_coerce_value(key, p.strip(), inner) for p in parts)
    return text


def load_array(key: str, text: str) -> np.ndarray:
    """An array parameter from ``FILE.npy``, ``FILE.csv`` or ``RELEASE_DIR:ARRAY_NAME``."""
    from dpframe.releases.release import Release

    spec = text[1:] if text.startswith("@") else text
    directory, _, name = spec.rpartition(":")
    if directory and Path(directory).is_dir():
        release = Release.load(directory)
        if name not in release.arrays:
            raise ParameterError(
                f"{key}: release {directory!r} has no array {name!r}; it has "
                f"{', '.join(sorted(release.arrays))}."
            )
        return release.arrays[name]
    path = Path(spec)
    if not path.is_file():
        raise ParameterError(
            f"{key}: {spec!r} is neither an array file (.npy/.csv) nor RELEASE_DIR:ARRAY."
        )
    try:
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False)
        return np.loadtxt(path, delimiter=",", ndmin=2)
    except (ValueError, OSError) as exc:
        raise ParameterError(f"{key}: cannot read an array from {spec!r}: {exc}.") from None


# -- JSON --------------------------------------------------------------------------------------


def params_to_dict(params: Any) -> dict[str, Any]:
    """All parameter values, JSON-ready."""
    return {f.name: to_jsonable(getattr(params, f.name)) for f in attrs.fields(type(params))}


def params_from_dict(params_class: type, data: Mapping[str, Any]) -> Any:
    """Rebuild a params object from :func:`params_to_dict` output (validates again)."""
    hints = typing.get_type_hints(params_class)
    values = {}
    for key, value in data.items():
        value = from_jsonable(value)
        if isinstance(value, list) and get_origin(hints.get(key)) is tuple:
            value = tuple(value)
        values[key] = value
    return build(params_class, values)
