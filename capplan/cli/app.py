"""The ``capplan`` command line (typer). Each subcommand lives in
``capplan/cli/commands/<name>.py`` and registers itself on :data:`app`.

Exit codes: 0 success, 2 bad input (one line naming the input) or a full disk
(``ENOSPC``/``EDQUOT``: one line naming the folder and the space needed), 1
internal failure.
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

import typer
from rich.console import Console

from capplan import __version__
from capplan.cli.commands import COMMANDS
from capplan.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, InputError
from capplan.store.diskfull import disk_full_error, is_disk_full

app = typer.Typer(
    name="capplan",
    help=(
        "Forecast GPU demand on three horizons (ETS next hour, LSTM next day, Prophet with China's "
        "holidays next week), tune reservation and autoscaling policies by replaying real demand, and "
        "write the dispatcher policy plus HPA, KEDA and Volcano manifests.\n\n"
        "Start with `capplan plan` (runs on the embedded real sample)."
    ),
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """capplan: GPU capacity planning from forecasts and replay."""
    if version:
        typer.echo(f"capplan {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


def _plain_flags() -> None:
    """Help shows no ``<bool>`` type label for on/off flags (typer prints one for every
    option): a flag takes no value, so there is no type to show."""
    from typer.core import TyperOption

    if getattr(TyperOption.display_type_rich, "_capplan", False):
        return
    original = TyperOption.display_type_rich

    def display_type_rich(self, ctx):
        return "" if self.is_bool_flag else original(self, ctx)

    display_type_rich._capplan = True
    TyperOption.display_type_rich = display_type_rich


#: below this many columns, help is click's plain text, which wraps whole words; rich's option
#: table leaves the help column too narrow there and cuts long words with "…"
RICH_HELP_MIN_WIDTH = 120


def reflow(text: str) -> str:
    """A docstring's paragraphs each on one line (blank-line separated), so help wraps at the
    terminal's width, not at the source's line breaks. Paragraphs that are lists or tables
    (lines starting with ``*``, ``-``, ``|`` or click's ``\\b``) keep their lines."""
    paras = inspect.cleandoc(text).split("\n\n")
    keep = ("*", "-", "|", "\b")
    return "\n\n".join(p if any(line.lstrip().startswith(keep) for line in p.splitlines()) else
                       " ".join(line.strip() for line in p.splitlines()) for p in paras)


def _help_style() -> None:
    """Rich help on wide terminals, plain whole-word help below :data:`RICH_HELP_MIN_WIDTH`
    columns; every command's help reflowed (:func:`reflow`)."""
    app.rich_markup_mode = "rich" if Console().width >= RICH_HELP_MIN_WIDTH else None
    for info in app.registered_commands:
        text = info.help or (info.callback.__doc__ if info.callback else None)
        if text:
            info.help = reflow(text)


def _register() -> None:
    _plain_flags()
    if not app.registered_commands:
        for mod in COMMANDS:
            mod.register(app)
    _help_style()


def _failed_folder(exc: BaseException) -> Path:
    """The folder of the file an OSError (or one it was raised from) names, else the working folder."""
    while exc is not None:
        name = getattr(exc, "filename", None)
        if isinstance(name, (str, os.PathLike)):
            p = Path(name)
            return p if p.is_dir() else p.parent
        exc = exc.__cause__ or exc.__context__
    return Path.cwd()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: maps errors to exit codes."""
    _register()
    try:
        rc = app(args=argv, standalone_mode=False)
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except typer.Exit as exc:
        if exc.exit_code == EXIT_INTERRUPTED:  # typer turns Ctrl-C into Exit(130)
            _interrupted()
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):  # Ctrl-C: one line, no traceback
        _interrupted()
    except SystemExit:
        raise
    except Exception as exc:
        # usage errors (unknown option, bad value, missing argument) come from the click that typer
        # bundles, not from the click package: recognise them by their interface; they exit 2
        if hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()
            sys.exit(exc.exit_code)
        if type(exc).__name__ in ("Exit", "NoArgsIsHelpError") and hasattr(exc, "exit_code"):
            sys.exit(exc.exit_code or 0)
        if is_disk_full(exc):  # a write outside capplan.store.atomic (e.g. a library's own file)
            typer.echo(f"error: {disk_full_error(_failed_folder(exc), None)}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        typer.echo(f"internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(EXIT_INTERNAL)
    # with standalone_mode=False click returns the code of typer.Exit(n) instead of raising
    if rc == EXIT_INTERRUPTED:  # typer turns Ctrl-C into Exit(130)
        _interrupted()
    sys.exit(rc if isinstance(rc, int) else 0)


def _interrupted() -> None:
    """Ctrl-C: one line on stderr and exit code 130 (capplan.errors.EXIT_INTERRUPTED)."""
    typer.echo("interrupted: stopped before finishing; nothing half-written was published (the store and "
               "--out keep their last complete run)", err=True)
    sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":  # python -m capplan.cli.app, as python -m capplan
    main()
