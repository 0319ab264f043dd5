"""``docs/configuration.md`` generated from the configuration's pydantic models.

``python -m capplan.config.docgen`` rewrites the file; ``python -m capplan.config.docgen --check``
exits 1 when the committed file differs from what the models say (the test suite
runs the same comparison). The generator walks :class:`capplan.config.settings.CapplanConfig`
generically: every field of every model reachable from it (directly, optional, in a
list or as map values) gets one table row with its YAML key, type, default, limits
(``ge``/``gt``/``le``/``lt``/``min_length``) and description. A description is the
field's ``Field(description=...)``, else a ``* ``name``: text`` bullet of its class's
docstring. Nested models become their own sections, titled by their YAML path
(``plan.training_bounds``, ``series[]``, ``prices.<gpu model>``).
"""

from __future__ import annotations

import argparse
import enum
import inspect
import json
import re
import sys
import types
import typing
from pathlib import Path

import annotated_types as at
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from capplan.config.settings import CapplanConfig
from capplan.store.atomic import write_text

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
INTRO = """\
# Configuration reference (`capplan.yaml`)

Generated from the configuration's pydantic models by `python -m capplan.config.docgen`; do not edit by
hand (a test fails when this file and the models differ). Every key is optional unless its default
says *required*. Unknown keys are refused with exit code 2, naming the key and its line. Relative
paths are relative to the configuration file. For what the settings do, see the
[README](../README.md) and [how the numbers are made](method.md).
"""


def _models(tp) -> list[type[BaseModel]]:
    """The pydantic models inside annotation ``tp`` (``X``, ``X | None``, ``list[X]``, ``dict[str, X]``)."""
    if inspect.isclass(tp) and issubclass(tp, BaseModel):
        return [tp]
    return [m for a in typing.get_args(tp) for m in _models(a)]


def _suffix(tp) -> str:
    """How a nested model's path continues: ``[]`` in a list, ``.<key>`` in a map, nothing otherwise."""
    origin = typing.get_origin(tp)
    if origin is list:
        return "[]"
    if origin is dict:
        return ".<gpu model>" if _models(typing.get_args(tp)[1]) and "price" in str(tp).lower() else ".<key>"
    for a in typing.get_args(tp):
        if _models(a):
            return _suffix(a)
    return ""


def type_name(tp) -> str:
    """A reader's name for annotation ``tp`` (``int``, ``one of a, b``, ``list of str`` ...)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return "null"
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is list:
        return f"list of {type_name(args[0])}"
    if origin is tuple:
        return "[" + ", ".join(type_name(a) for a in args) + "]"
    if origin is dict:
        return f"map of {type_name(args[0])} to {type_name(args[1])}"
    if inspect.isclass(tp) and issubclass(tp, BaseModel):
        return "section"
    if inspect.isclass(tp) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in tp)
    return getattr(tp, "__name__", str(tp))


def _default(field) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "*required*"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(section)"
    if value is None:
        return "none"
    if isinstance(value, tuple):
        value = list(value)
    return f"`{json.dumps(value)}`" if not isinstance(value, str) else f"`{value}`"


_LIMITS = ((at.Ge, "ge", "≥"), (at.Gt, "gt", ">"), (at.Le, "le", "≤"), (at.Lt, "lt", "<"),
           (at.MinLen, "min_length", "length ≥"), (at.MaxLen, "max_length", "length ≤"))


def _limits(field) -> str:
    out = []
    for m in field.metadata:
        for cls, attr, sign in _LIMITS:
            if isinstance(m, cls):
                out.append(f"{sign} {getattr(m, attr)}")
    return ", ".join(out)


def _bullets(model: type[BaseModel]) -> dict[str, str]:
    """``* ``name``: text`` bullets of ``model``'s docstring (and its bases'), joined to one line each."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
        for m in re.finditer(r"^\* ((?:``[a-z_]+``/?)+): (.*?)(?=^\* |^\S|\Z)", doc, re.M | re.S):
            for name in re.findall(r"``([a-z_]+)``", m.group(1)):
                found[name] = " ".join(m.group(2).split())
    return found


def description(model: type[BaseModel], name: str) -> str:
    """Field ``name``'s description (module docstring; a section's falls back to its model's first
    docstring paragraph); empty when it has none."""
    field = model.model_fields[name]
    text = field.description or _bullets(model).get(name, "")
    if not text and _models(field.annotation):  # a section: its model's summary
        text = _summary(_models(field.annotation)[0])
    return re.sub(r":(?:func|class|mod|data|meth):`~?([^`]+)`", r"`\1`", text).replace("``", "`")


def _summary(model: type[BaseModel]) -> str:
    doc = inspect.cleandoc(model.__doc__ or "")
    first = re.sub(r",? e\.g\.::$|::$", ".", " ".join(doc.split("\n\n")[0].split()))
    return re.sub(r":(?:func|class|mod|data|meth):`~?([^`]+)`", r"`\1`", first).replace("``", "`")


def sections(model: type[BaseModel] = CapplanConfig, path: str = "") -> list[tuple[str, type[BaseModel]]]:
    """``(yaml path, model)`` of ``model`` and every model reachable from it, depth first, each once."""
    out, seen = [], set()

    def walk(m, p):
        if (m, p) in seen:
            return
        seen.add((m, p))
        out.append((p, m))
        for name, f in m.model_fields.items():
            for sub in _models(f.annotation):
                walk(sub, f"{p}.{name}{_suffix(f.annotation)}" if p else f"{name}{_suffix(f.annotation)}")

    walk(model, path)
    return out


def undocumented(model: type[BaseModel] = CapplanConfig) -> list[str]:
    """YAML paths of the fields that have no description."""
    return [f"{p + '.' if p else ''}{name}" for p, m in sections(model) for name in m.model_fields
            if not description(m, name)]


def render(model: type[BaseModel] = CapplanConfig) -> str:
    """The whole Markdown reference."""
    parts = [INTRO]
    for path, m in sections(model):
        title = f"`{path}`" if path else "Top level"
        parts.append(f"\n## {title}\n\n{_summary(m)}\n\n| key | type | default | limits | description |\n"
                     "| --- | --- | --- | --- | --- |\n")
        for name, f in m.model_fields.items():
            cells = [f"`{name}`", type_name(f.annotation), _default(f), _limits(f), description(m, name)]
            parts.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Write ``docs/configuration.md`` (or ``--out``); with ``--check`` compare instead and return 1
    when it differs (0 when it is current)."""
    ap = argparse.ArgumentParser(prog="python -m capplan.config.docgen", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DOC)
    ap.add_argument("--check", action="store_true", help="exit 1 when the file differs from the models")
    a = ap.parse_args(argv)
    text = render()
    if a.check:
        current = a.out.read_text() if a.out.exists() else ""
        if current != text:
            print(f"{a.out} is out of date: run python -m capplan.config.docgen", file=sys.stderr)
            return 1
        return 0
    write_text(a.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
