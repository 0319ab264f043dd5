"""``capplan export``: render, check or diff the dispatcher policy and manifests.

* ``capplan export --validate DIR`` — check every YAML/JSON file under DIR
  (also ones edited by hand): Kubernetes strict schemas, the KEDA/Volcano CRD
  schemas, the DispatcherPolicy schema and CRD, and the lint rules. Prints one
  line per problem, ``file: path: [rule] message``.
* ``capplan export --out DIR`` — re-render ``policy.yaml`` and the manifests
  from ``--policy`` (default ``DIR/policy.yaml``; its ``spec.fleet``, when present, gives the Kueue objects)
  with the ``export:`` settings of ``--config``; the folder is swapped in atomically and files the
  exporter does not own (parquet, report.json) are kept.
* ``--diff`` — print a unified diff of what that would change, write nothing.

Exit codes (the CLI's: 0 success, 2 bad input, 1 internal failure; ``--diff``
follows ``diff`` and ``kubectl diff`` so CI can gate on it):

| mode | 0 | 1 | 2 | 3 |
| --- | --- | --- | --- | --- |
| ``--validate DIR`` | no problem | internal failure | problems found (the files are bad input), or no such folder | |
| ``--diff`` | no differences | differences shown | bad input (policy, config) | internal failure |
| re-render | written | internal failure | bad input, or the policy renders invalid manifests | |
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError

from capplan.cli.commands.output import first_few
from capplan.config.settings import load_config
from capplan.errors import EXIT_BAD_INPUT, InputError
from capplan.report.validation import checked_file_count, folder_files, validate_folder
from capplan.store import atomic
from optimizer.exporters import OWNED, ExportValidationError, is_own_file, render_all, write_all
from optimizer.exporters.checks.problem import yaml_problem
from optimizer.exporters.dispatcher_policy import read_policy
from optimizer.exporters.fleet.policy_block import fleet_from_policy

EXIT_DIFFERENCES = 1  # --diff: as diff(1) and kubectl diff
EXIT_DIFF_INTERNAL = 3  # --diff: an internal failure (1 already means "differences")


DIFF_MAX_BYTES = 1 << 20
"""Largest file ``--diff`` reads (1 MiB; capplan's manifests are a few KiB): a larger one is shown as its size."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _diff_text_of(f: Path) -> str:
    """What ``--diff`` compares for a file on disk: its text, with control characters (terminal escapes)
    shown as ``\\xNN``; a one-line placeholder for a symlink (never followed: it may lead out of the
    folder), a file over :data:`DIFF_MAX_BYTES` (never read whole) or a binary file."""
    if f.is_symlink():
        return f"(a symlink to {_CONTROL.sub('?', os.readlink(f))}: not followed)\n"
    size = f.stat().st_size
    if size > DIFF_MAX_BYTES:
        return f"({size} bytes: larger than {DIFF_MAX_BYTES} bytes, not read)\n"
    data = f.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"(binary file, {size} bytes)\n"
    if "\x00" in text:
        return f"(binary file, {size} bytes)\n"
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _existing(out_dir: Path) -> dict[str, str]:
    """``path -> text`` (:func:`_diff_text_of`) of what capplan owns under ``out_dir`` (:data:`OWNED`),
    walking folders without following symlinks."""
    found = {}
    for top in OWNED:
        p = out_dir / top
        if p.is_symlink() or p.is_file():
            found[top] = _diff_text_of(p)
        elif p.is_dir():
            for d, dirs, files in os.walk(p, followlinks=False):
                for name in sorted(files) + sorted(x for x in dirs if (Path(d) / x).is_symlink()):
                    f = Path(d) / name
                    found[f.relative_to(out_dir).as_posix()] = _diff_text_of(f)
    return dict(sorted(found.items()))


def diff_text(old: dict[str, str], new: dict[str, str]) -> str:
    """Unified diff of two ``path -> text`` sets (``a/`` = on disk, ``b/`` = rendered)."""
    chunks = []
    for rel in sorted(set(old) | set(new)):
        a, b = old.get(rel), new.get(rel)
        if a == b:
            continue
        chunks.extend(difflib.unified_diff(
            (a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
            fromfile=f"a/{rel}" if a is not None else "/dev/null",
            tofile=f"b/{rel}" if b is not None else "/dev/null"))
    return "".join(chunks)


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export(
        validate: Optional[Path] = typer.Option(None, "--validate", help="Check every manifest under this folder "
                                                "(schemas and lint rules); exit 2 if any problem."),
        out_dir: Path = typer.Option(Path("capplan-out"), "--out", help="Output folder of `capplan plan`."),
        policy: Optional[Path] = typer.Option(None, "--policy", help="DispatcherPolicy to render from "
                                              "(default: OUT/policy.yaml)."),
        config: Optional[Path] = typer.Option(None, "--config", help="capplan.yaml; its `export:` section "
                                              "sets namespace, autoscaler, targets, ..."),
        diff: bool = typer.Option(False, "--diff", help="Show what would change in OUT; write nothing. Exit 1 "
                                  "when there are differences (as diff and kubectl diff), 0 when none."),
    ):
        """Validate, re-render or diff the dispatcher policy and Kubernetes manifests.

        Exit codes: --validate: 0 no problem, 2 problems (or no such folder), 1 internal failure; --diff: 0 no
        differences, 1 differences, 2 bad input, 3 internal failure; otherwise 0 written,
        2 bad input, 1 internal failure.
        """
        import yaml

        cfg = load_config(config)
        if validate is not None and (diff or policy is not None):
            raise InputError("--validate checks a folder as it is; it takes neither --diff nor --policy (run them "
                             "separately)")
        if validate is not None:
            if not validate.is_dir():
                raise InputError(f"--validate {validate}: no such folder")
            if not folder_files(validate):
                raise InputError(f"--validate {validate}: no .yaml, .yml or .json file under it; nothing to validate "
                                 "(point it at a capplan plan or export output folder)")
            problems = validate_folder(validate, cfg.export)
            for p in problems:
                typer.echo(str(p))
            n = checked_file_count(validate)
            typer.echo(f"{len(problems)} problem(s) in {n} file(s) under {validate}", err=True)
            sys.exit(EXIT_BAD_INPUT if problems else 0)  # typer.Exit codes are swallowed by standalone_mode=False

        src = policy or out_dir / "policy.yaml"
        if not src.is_file():
            raise InputError(f"--policy {src}: file not found (run `capplan plan` first or pass --policy)")
        try:
            plans = read_policy(src)
            fleet = fleet_from_policy(yaml.safe_load(src.read_text()))  # spec.fleet: the Kueue quotas, or None
        except (yaml.YAMLError, UnicodeDecodeError) as exc:  # PyYAML's message quotes the file: never shown
            raise InputError(f"--policy {src}: {yaml_problem(exc)}") from None
        except ValidationError as exc:  # the field and the rule, not the value (pydantic echoes input values)
            e = exc.errors()[0]
            raise InputError(f"--policy {src}: not a DispatcherPolicy: {'.'.join(map(str, e['loc']))}: "
                             f"{e['msg']}") from None
        except ValueError as exc:  # capplan's own shape checks (plans_from_policy)
            raise InputError(f"--policy {src}: not a DispatcherPolicy: {exc}") from None
        except (KeyError, TypeError, AttributeError) as exc:  # a field of the wrong type or shape
            raise InputError(f"--policy {src}: not a DispatcherPolicy ({type(exc).__name__} reading its fields: a "
                             "field of the wrong shape); write it again with `capplan plan`") from None
        if diff:
            try:
                text = diff_text(_existing(out_dir), render_all(plans, cfg.export, fleet))
            except (ValueError, OSError) as exc:  # a policy that cannot be rendered: bad input
                raise InputError(f"--policy {src}: cannot render manifests: {exc}") from None
            except Exception as exc:  # noqa: BLE001 — only the exit code changes: 1 means "differences" here
                typer.echo(f"internal error: {type(exc).__name__}: {exc}", err=True)
                sys.exit(EXIT_DIFF_INTERNAL)
            typer.echo(text if text else f"no changes in {out_dir}", nl=bool(not text))
            sys.exit(EXIT_DIFFERENCES if text else 0)

        root = out_dir.resolve()
        try:
            new = set(render_all(plans, cfg.export, fleet))
        except ValueError as exc:  # e.g. a pre-scaling window that is not a peak
            raise InputError(f"--policy {src}: cannot render manifests: {exc}") from None
        theirs = [r for r in _existing(out_dir) if r not in new and not is_own_file(out_dir, r)]
        if theirs:  # the swap would delete them: files under capplan's folders that capplan did not write
            raise InputError(f"--out {out_dir}: {len(theirs)} file(s) under {', '.join(OWNED[1:])} that capplan did "
                             f"not write ({first_few(theirs)}) would be removed by the re-render; move them out of "
                             "those folders")
        try:
            with atomic.replace_dir(out_dir) as tmp:
                if out_dir.is_dir():
                    shutil.copytree(out_dir, tmp, dirs_exist_ok=True,
                                    ignore=lambda d, names: [n for n in names
                                                             if Path(d).resolve() == root and n in OWNED])
                written = write_all(plans, tmp, cfg.export, fleet)
        except ExportValidationError as exc:
            typer.echo(str(exc), err=True)
            sys.exit(EXIT_BAD_INPUT)
        except ValueError as exc:  # e.g. a pre-scaling window that is not a peak
            raise InputError(f"--policy {src}: cannot render manifests: {exc}") from None
        typer.echo(f"wrote {len(written)} files to {out_dir}/ (kubectl apply -k {out_dir}/manifests)")
