"""The finding type shared by schema validation (:mod:`.validate`) and the lint
rules (:mod:`.lint`), so that neither module imports the other's internals."""

from __future__ import annotations

from dataclasses import dataclass


def yaml_problem(exc: Exception) -> str:
    """A YAML parse error (``yaml.YAMLError``) or a decoding error as ``at line L, column C:
    <problem>``, never the file's text: PyYAML's own message quotes the offending lines,
    which may hold a secret (a password file passed by mistake)."""
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    where = getattr(exc, "problem_mark", None)
    at = f"at line {where.line + 1}, column {where.column + 1}: " if where is not None else ""
    what = getattr(exc, "problem", None) or type(exc).__name__
    return f"invalid YAML {at}{what}"


#: Suffixes of the files that validation reads.
YAML_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Problem:
    """One finding: ``file`` (relative to the checked folder), JSON ``path``, ``rule``, ``message``."""

    file: str
    path: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.path or '.'}: [{self.rule}] {self.message}"


class ExportValidationError(ValueError):
    """Exported files failed validation; ``problems`` lists every finding."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        shown = "\n".join(f"  {p}" for p in self.problems[:50])
        more = f"\n  ... and {len(self.problems) - 50} more" if len(self.problems) > 50 else ""
        super().__init__(f"{len(self.problems)} problem(s) in exported files:\n{shown}{more}")


__all__ = ["Problem", "ExportValidationError", "YAML_SUFFIXES"]
