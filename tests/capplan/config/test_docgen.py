"""docs/configuration.md is generated from the configuration models (capplan/config/docgen.py) and kept current."""

from __future__ import annotations

from pydantic import BaseModel, Field

from capplan.config import docgen


def test_the_committed_configuration_reference_is_current():
    # fails when a field, default, limit or description changes without `python -m capplan.config.docgen`
    assert docgen.DOC.read_text() == docgen.render(), ("docs/configuration.md is stale: run "
                                                       "python -m capplan.config.docgen")
    assert docgen.main(["--check"]) == 0


def test_every_configuration_key_has_a_description():
    assert docgen.undocumented() == []


class _Inner(BaseModel):
    """An inner section.

    * ``y``: y from the docstring.
    """

    x: int = Field(default=1, ge=0, le=9, description="an x")
    y: str = "a"
    z: float


class _Outer(BaseModel):
    """The outer model, e.g.::

        a: 1
    """

    items: list[_Inner] = Field(default_factory=list)
    by_name: dict[str, _Inner] = Field(default_factory=dict)
    maybe: _Inner | None = None


def test_the_generator_walks_nested_models_generically(tmp_path):
    assert [p for p, _ in docgen.sections(_Outer)] == ["", "items[]", "by_name.<key>", "maybe"]
    text = docgen.render(_Outer)
    assert "## `items[]`\n\nAn inner section.\n" in text and "The outer model.\n" in text
    assert "| `x` | int | `1` | ≥ 0, ≤ 9 | an x |" in text
    assert "| `y` | str | `a` |  | y from the docstring. |" in text  # a docstring bullet when Field has none
    assert "| `z` | float | *required* |  |  |" in text
    assert "| `maybe` | section or null | none |  | An inner section. |" in text
    assert docgen.undocumented(_Outer) == ["items[].z", "by_name.<key>.z", "maybe.z"]
    # --check compares a file with the models: 1 when it differs, 0 once written
    out = tmp_path / "configuration.md"
    assert docgen.main(["--check", "--out", str(out)]) == 1
    assert docgen.main(["--out", str(out)]) == 0 and docgen.main(["--check", "--out", str(out)]) == 0
