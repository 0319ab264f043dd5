"""What one stored point means: the query a pull sends for a series' step.

A plain ``query_range`` has two faults for capacity planning:

* **Staleness.** At each step Prometheus evaluates an instant selector with
  the last sample of the previous 5 minutes (the lookback delta), so after an
  exporter dies its last value is repeated as if it were demand (backfilled
  or federated data carry no staleness markers).
* **Peaks between steps vanish.** With step 5m only the sample at each step
  is seen; a 2-minute burst between two steps is never stored.

So the pull rewrites the query (:func:`step_query`):

1. every **instant vector selector** ``m{...}`` becomes
   ``last_over_time(m{...}[W - 1ms])``: a sample counts only within ``W`` of its
   scrape, so points after a series' last real sample are missing instead of
   repeated (range selectors ``m[5m]`` inside ``rate`` etc. are left alone:
   their window is the user's choice);
2. with ``step_aggregation: max`` (the default) the whole expression is taken
   at a ``W`` resolution inside each step and the maximum kept:
   ``max_over_time((Q')[step - 1s : W])`` — the peak of the step
   ``(t - step, t]``; with ``step_aggregation: last`` the selectors look back one
   whole step instead (``W = step``) and no subquery is used: the last value of
   the step.

**The same answer on every engine.** Prometheus 2.x selects a range ``[t - r, t]``
closed at the left; VictoriaMetrics and Prometheus 3.x select ``(t - r, t]``
(Prometheus 3.0 migration guide, "Range selectors and lookback exclude samples
coinciding with the left boundary"; VictoriaMetrics MetricsQL docs, "rollup
window"). A range one millisecond (selectors) or one second (the step's
subquery, whose points lie on multiples of ``W``) short of a whole window
holds the same samples under both: with scrapes every ``W`` a selector sees
exactly one sample of each series — so a pod whose series changed labels at
that scrape is not counted under both label sets — and the subquery sees
exactly the ``step / W`` points of ``(t - step, t]``.

``W`` is the series' ``scrape_interval`` (default ``prometheus.scrape_interval``,
1m, Prometheus' own default). Set it to the real scrape interval: shorter
windows miss samples of slower targets; peaks shorter than ``W`` can be missed.
"""

from __future__ import annotations

from typing import Literal

AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                          "bottomk", "topk", "quantile", "limitk", "limit_ratio"})
_LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"})
_ID_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_ID_CHARS = _ID_START | set("0123456789")


def _skip_string(s: str, i: int) -> int:
    q = s[i]
    i += 1
    while i < len(s) and s[i] != q:
        i += 2 if s[i] == "\\" and q != "`" else 1
    return i + 1


def _skip_bracket(s: str, i: int, open_: str, close: str) -> int:
    """Index after the bracket closing the one at ``s[i]`` (strings respected)."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c in "\"'`":
            i = _skip_string(s, i)
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced {open_!r}")


def _ws(s: str, i: int) -> int:
    while i < len(s) and s[i].isspace():
        i += 1
    return i


def _modifiers(s: str, i: int) -> int:
    """Index after any ``offset <duration>`` / ``@ <time>`` following a selector."""
    while True:
        j = _ws(s, i)
        if s[j:j + 6].lower() == "offset" and (j + 6 == len(s) or s[j + 6] not in _ID_CHARS):
            k = _ws(s, j + 6)
            if k < len(s) and s[k] == "-":
                k += 1
            while k < len(s) and (s[k].isalnum() or s[k] == "."):
                k += 1
            i = k
        elif j < len(s) and s[j] == "@":
            k = _ws(s, j + 1)
            if s[k:].startswith(("start(", "end(")):
                k = _skip_bracket(s, s.index("(", k), "(", ")")
            else:
                while k < len(s) and (s[k].isalnum() or s[k] in ".+-"):
                    k += 1
            i = k
        else:
            return i


def window_selectors(query: str, fn: str, window_s: int) -> str:
    """``query`` with each instant vector selector ``sel`` (and its ``offset``/``@``)
    replaced by ``fn(sel[<window_s * 1000 - 1>ms] ...)`` (one millisecond short of the
    window, so that a sample exactly ``window_s`` old is outside under both closed and
    left-open range semantics; see the module docstring). Range selectors, subqueries, label
    lists (``by (...)``, ``on (...)``), strings and numbers are kept as written.

    Raises ValueError on unbalanced brackets or quotes.
    """
    s, out, i = query, [], 0
    while i < len(s):
        c = s[i]
        if c in "\"'`":
            j = _skip_string(s, i)
            if j > len(s):
                raise ValueError("unterminated string")
            out.append(s[i:j])
            i = j
        elif c == "#":
            j = s.find("\n", i)
            j = len(s) if j < 0 else j
            out.append(s[i:j])
            i = j
        elif c == "[":
            j = _skip_bracket(s, i, "[", "]")
            out.append(s[i:j])
            i = j
        elif c.isdigit() or (c == "." and i + 1 < len(s) and s[i + 1].isdigit()):
            j = i
            while j < len(s) and (s[j].isalnum() or s[j] in "._") or (
                    j < len(s) and s[j] in "+-" and s[j - 1] in "eE" and not s[i:j].lower().startswith("0x")):
                j += 1
            out.append(s[i:j])
            i = j
        elif c in _ID_START or c == "{":
            j = i
            while j < len(s) and s[j] in _ID_CHARS:
                j += 1
            word = s[i:j]
            k = _ws(s, j)
            low = word.lower()
            if word and low in _LABEL_LISTS:
                out.append(s[i:k])
                if k < len(s) and s[k] == "(":
                    e = _skip_bracket(s, k, "(", ")")
                    out.append(s[k:e])
                    k = e
                i = k
                continue
            if word and (low in _KEYWORDS or low in AGGREGATIONS or (k < len(s) and s[k] == "(")):
                out.append(word)
                i = j
                continue
            # a vector selector: name and/or {matchers}
            e = j
            if k < len(s) and s[k] == "{":
                e = _skip_bracket(s, k, "{", "}")
            after = _ws(s, e)
            if after < len(s) and s[after] == "[":  # range selector or subquery: unchanged
                out.append(s[i:e])
                i = e
                continue
            m = _modifiers(s, e)
            out.append(f"{fn}({s[i:e]}[{window_s * 1000 - 1}ms]{s[e:m]})")
            i = m
        else:
            out.append(c)
            i += 1
    return "".join(out)


def step_query(query: str, step_s: int, window_s: int, how: Literal["max", "last"] = "max",
               combine: str | None = None) -> str:
    """The PromQL a pull sends for ``query`` at ``step_s`` (see the module docstring).

    ``window_s``: the scrape interval W in seconds; ``how``: ``max`` (peak of
    each step) or ``last`` (last value of each step). ``combine`` (sum, avg,
    max, min: how the query's label sets add up, e.g. the outer ``sum by
    (pod)``) is applied inside the step maximum, so the peak is the peak of the
    total, not a sum of per-pod peaks.
    """
    if how == "last" or step_s <= window_s:
        return window_selectors(query, "last_over_time", step_s if how == "last" else min(step_s, window_s))
    inner = window_selectors(query, "last_over_time", window_s)
    if combine:
        inner = f"{combine}({inner})"
    return f"max_over_time(({inner})[{step_s - 1}s:{window_s}s])"
