"""Validation of an output folder (``policy.yaml``, ``manifests/``, ...), for
every entry point: ``capplan export --validate`` and the dashboard's Manifests
page call these functions, so they report the same findings.

The checks themselves belong to :mod:`optimizer.exporters.checks.validate` (strict
``kubernetes-validate``, the KEDA/Volcano CRD schemas, the DispatcherPolicy
schema) and :mod:`optimizer.exporters.checks.lint` (rules schemas cannot express).
Every finding is a :class:`~optimizer.exporters.checks.validate.Problem` with
``file``, ``path``, ``rule`` and ``message``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from optimizer.exporters.checks.validate import YAML_SUFFIXES, Problem, load_docs, validate_dir
from optimizer.exporters.settings import ExportSettings

__all__ = ["CROSS_FILE_RULES", "FileStatus", "Problem", "file_statuses", "folder_files", "validate_folder"]

#: Lint rules that compare several files of a folder; a finding names one of
#: them, but it is not a fault of that file alone.
CROSS_FILE_RULES = frozenset({"kustomization-resources", "unique-name", "one-autoscaler-per-target"})


@dataclass(frozen=True)
class FileStatus:
    """Validation status of one file: ``problems`` are its own findings (cross-file
    rules excluded); ``checked`` is False for JSON data files (no ``apiVersion``),
    which the validator skips."""

    file: str
    checked: bool = True
    problems: tuple[Problem, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def status(self) -> str:
        """``valid``, ``invalid`` or ``not checked``."""
        if self.problems:
            return "invalid"
        return "valid" if self.checked else "not checked"


def folder_files(folder: str | Path) -> list[Path]:
    """The YAML/JSON files under ``folder`` that :func:`validate_folder` reads, sorted."""
    return sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix in YAML_SUFFIXES)


def checked_file_count(folder: str | Path) -> int:
    """How many files under ``folder`` ``capplan export --validate`` checks (every YAML/JSON
    file, report.json included: :func:`folder_files`). The one count that the plan output,
    ``export --validate`` and the dashboard's Manifests page show."""
    return len(folder_files(folder))


def validate_folder(folder: str | Path, settings: ExportSettings | None = None) -> list[Problem]:
    """Every problem in the YAML/JSON files under ``folder``: schemas, then lint rules.

    ``settings`` (the config's ``export:`` section) gives the schema folder and
    the Kubernetes version; the defaults when None.

    Raises
    ------
    FileNotFoundError: ``folder`` does not exist.
    """
    s = settings or ExportSettings()
    return validate_dir(folder, s.schemas_dir, s.kubernetes_version)


def file_statuses(folder: str | Path, problems: list[Problem]) -> list[FileStatus]:
    """One :class:`FileStatus` per file of :func:`folder_files`, from the
    ``problems`` that :func:`validate_folder` found there."""
    root = Path(folder)
    own: dict[str, list[Problem]] = {}
    for p in problems:
        if p.rule not in CROSS_FILE_RULES:
            own.setdefault(p.file.split("#")[0], []).append(p)
    out = []
    for f in folder_files(root):
        rel = f.relative_to(root).as_posix()
        checked = True
        if f.suffix == ".json" and rel not in own:
            docs, _ = load_docs(f, rel)
            checked = any(isinstance(d, dict) and "apiVersion" in d for d in docs)
        out.append(FileStatus(rel, checked, tuple(own.get(rel, ()))))
    return out
