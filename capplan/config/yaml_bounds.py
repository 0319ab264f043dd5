"""Reading ``capplan.yaml`` within bounds: a config can neither hang nor exhaust the process.

A YAML document is small text that can stand for a huge object: each alias (``*a``)
repeats a whole anchored subtree, so ten levels of nine aliases each (a few hundred
bytes, the "billion laughs") expand to 9**10 values, and 50,000 nested ``[`` blow
Python's recursion limit. :func:`read_yaml` therefore, before anything walks the
document:

* reads at most :data:`MAX_BYTES` (a larger file is refused without being parsed);
* scans the event stream (libyaml, no recursion) and refuses nesting deeper than
  :data:`MAX_DEPTH` or more than :data:`MAX_VALUES` values as written, stopping at
  the first breach, so composing cannot exhaust the stack nor take long;
* composes the node graph once (an alias is a second reference to the same node,
  nothing is copied) and visits every distinct node once, computing how many values
  and how deep the document is *once aliases are expanded*, refusing more than
  :data:`MAX_VALUES` values, a depth over :data:`MAX_DEPTH` or an alias that contains
  itself; the same visit finds a key that appears twice in one mapping. Its cost is
  linear in the document's size, whatever the aliases;
* constructs the Python objects with ``yaml.SafeLoader``'s constructor (plain types
  only) and refuses a non-finite number (``.inf``, ``.nan``), naming its key.

The limits are far above any real config (one with a thousand series is about
150 KiB and 15,000 values) and each breach is an :class:`capplan.errors.InputError` that names
the limit, so the CLI exits 2.
"""

from __future__ import annotations

import math
import re
import typing
from pathlib import Path

import yaml

from capplan.errors import InputError, looks_like_name
from optimizer.exporters.checks.problem import yaml_problem

MAX_BYTES = 256 * 1024
"""Largest config file read, in bytes (256 KiB)."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and lists, counted after alias expansion."""
MAX_VALUES = 50_000
"""Most values (scalars, lists, mappings) in the document once every alias is expanded."""

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
_NODE = (yaml.ScalarEvent, yaml.AliasEvent, *_OPEN)
_FLOAT = "tag:yaml.org,2002:float"


def key_path(loc: tuple) -> str:
    """A location as a config key path: ``("forecast", "events", 3)`` -> ``forecast.events[3]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _read_text(p: Path) -> str:
    with p.open("rb") as fh:
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise InputError(f"config {p}: larger than the limit of {MAX_BYTES // 1024} KiB for a config file; "
                         "a capplan.yaml is a few KiB (is this the right file?)")
    return raw.decode("utf-8")


def _check_events(p: Path, text: str) -> None:
    """Refuse nesting over :data:`MAX_DEPTH` and more than :data:`MAX_VALUES` values as written,
    before the (recursive) composer runs."""
    depth = count = 0
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, _NODE):
            count += 1
            if count > MAX_VALUES:
                raise InputError(f"config {p}: more than the limit of {MAX_VALUES:,} values "
                                 f"(line {ev.start_mark.line + 1})")
        if isinstance(ev, _OPEN):
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(f"config {p}: nested deeper than the limit of {MAX_DEPTH} levels "
                                 f"(line {ev.start_mark.line + 1})")
        elif isinstance(ev, _CLOSE):
            depth -= 1


def _shown_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}", key) else "(not shown)"


def _measure(p: Path, root: yaml.Node) -> bool:
    """One visit per distinct node (iterative, memoised): the expanded size and depth
    of every node, a cycle (an alias inside its own anchor), and a duplicate key.
    Returns whether some float scalar is not finite (``.inf``, ``.nan``)."""
    non_finite = False
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if isinstance(node, yaml.ScalarNode):
            size[nid], depth[nid] = 1, 0
            non_finite = non_finite or (node.tag == _FLOAT and node.value.lower().lstrip("+-") in (".inf", ".nan"))
            continue
        kids = ([x for kv in node.value for x in kv] if isinstance(node, yaml.MappingNode) else list(node.value))
        if done:
            open_.discard(nid)
            size[nid] = 1 + sum(size[id(k)] for k in kids)
            depth[nid] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[nid] > MAX_VALUES:
                raise InputError(f"config {p}: more than the limit of {MAX_VALUES:,} values once its aliases "
                                 f"are expanded (the node at line {node.start_mark.line + 1}); "
                                 "write the values out or use fewer aliases")
            if depth[nid] > MAX_DEPTH:
                raise InputError(f"config {p}: nested deeper than the limit of {MAX_DEPTH} levels once its "
                                 f"aliases are expanded (line {node.start_mark.line + 1})")
            continue
        if nid in size:
            continue
        if nid in open_:
            raise InputError(f"config {p}: the alias at line {node.start_mark.line + 1} refers to a node that "
                             "contains it (a recursive alias)")
        open_.add(nid)
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for k, _v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else None
                if key is not None and key in seen:
                    raise InputError(f"config {p}: key {_shown_key(key)!r} appears twice in one mapping "
                                     f"(line {k.start_mark.line + 1}); YAML would keep only the last value")
                seen.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in reversed(kids) if id(k) not in size)
    return non_finite


def _non_finite(data, path: tuple = ()) -> tuple | None:
    """Key path of the first float that is not finite (iterative; ``data`` is bounded)."""
    stack = [(data, path)]
    while stack:
        v, loc = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return loc
        if isinstance(v, dict):
            stack.extend((x, loc + (str(k),)) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, loc + (i,)) for i, x in enumerate(v))
    return None


def read_yaml(p: Path) -> tuple[object, yaml.Node | None]:
    """The config file ``p`` as plain Python data and its composed node graph (for
    :func:`key_line`), within the bounds above.

    Raises InputError: unreadable or not UTF-8, invalid YAML, over a bound (the
    message names the limit), a duplicate key, or a non-finite number (naming the key).
    Never shows file content.
    """
    try:
        text = _read_text(p)
        _check_events(p, text)
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return {}, None
            non_finite = _measure(p, node)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except UnicodeDecodeError:  # a binary or otherwise encoded file: never shown
        raise InputError(f"config {p}: not UTF-8 text; pass a capplan.yaml") from None
    except OSError as exc:
        raise InputError(f"config {p}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        if "nesting depth" in str(getattr(exc, "problem", "")):
            raise InputError(f"config {p}: nested deeper than libyaml's limit of 1,000 levels (a capplan config "
                             f"needs fewer than {MAX_DEPTH})") from None
        raise InputError(f"config {p}: {yaml_problem(exc)}") from None
    bad = _non_finite(data) if non_finite else None
    if non_finite:
        raise InputError(f"config {p}: {key_path(bad) or 'the document'}: not a finite number (.inf and .nan "
                         "are not allowed); give a number")
    return data, node


def key_line(root: yaml.Node | None, loc: tuple) -> int | None:
    """1-based line of the mapping key at ``loc`` in the composed document (None if not found)."""
    node = root
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            hit = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if hit is None:
                return None
            if part == loc[-1]:
                return hit[0].start_mark.line + 1
            node = hit[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return None
    return None


def field_description(model, loc: tuple) -> str | None:
    """The ``description`` of the pydantic field at ``loc`` under ``model`` (a BaseModel class), through
    optional, list and dict fields (a dict's key and a list's index are skipped); None when none is found."""
    cur, desc = model, None
    for part in loc:
        fields = getattr(cur, "model_fields", None)
        if fields is None or not isinstance(part, str) or part not in fields:
            if desc is not None and isinstance(part, (str, int)):  # a dict key or list index: the value's model
                continue
            return None
        desc, cur = fields[part].description, _value_model(fields[part].annotation)
    return desc


def _value_model(ann):
    """The BaseModel class inside an annotation (``X | None``, ``list[X]``, ``dict[str, X]``), or None."""
    if isinstance(ann, type) and hasattr(ann, "model_fields"):
        return ann
    for arg in reversed(typing.get_args(ann)):
        got = _value_model(arg)
        if got is not None:
            return got
    return None


def describe(err: dict, root: yaml.Node | None, model=None) -> str:
    """A pydantic validation error as ``key.path[i]: message``, never echoing file content:
    an unknown key is named by its line, not its text (a non-YAML file such as
    ``/etc/shadow`` parses as one long key). With ``model`` (the BaseModel class validated), a
    value error adds the key's line and the field's description, which says the unit and range."""
    loc = tuple(err["loc"])
    if err.get("type") == "extra_forbidden":
        line = key_line(root, loc)
        where = key_path(loc[:-1]) or "the top level"
        key = str(loc[-1])
        # a key that looks like a config key is named (a typo is then easy to see); anything else is file
        # content (a password file's first line parses as one long key) and is never shown
        named = f"{key!r} " if looks_like_name(key) else ""
        return (f"unknown key {named}at line {line if line else '?'} in {where}; is this a capplan config? "
                "(see the README's configuration section)")
    line = key_line(root, loc)
    desc = field_description(model, loc) if model is not None else None
    msg = str(err["msg"]).removeprefix("Value error, ")  # pydantic's prefix for a validator's ValueError
    where = key_path(loc) or "the config as a whole"  # a check across keys (a model validator) has no key path
    return (f"{where}: {msg}" + (f" (line {line})" if line else "")
            + (f"; expected: {desc}" if desc else ""))
