"""The finding type shared by schema validation (:mod:`.validate`) and the lint
rules (:mod:`.lint`), so that neither module imports the other's internals."""

from __future__ import annotations

from dataclasses import dataclass

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
