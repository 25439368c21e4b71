"""The ``mindory`` command: a thin door over :class:`mindory.library.Library`.

Owns: argument parsing, tables for people, ``--json`` for scripts (the same shapes as
the HTTP API), one-line errors. May import the library room (and the server, in
``serve`` only); never the store or the importers. Each command's module is imported
only when that command runs, so ``mindory --help`` loads click and nothing else.

Every library command opens the library given by ``--db`` (or ``MINDORY_DB``, else
``MINDORY_DATABASE_URL``, else the library in the user data directory). ``--db`` and
``--user`` are taken before the command's name or after it (the last one given wins).
Errors print
one line ``mindory: error: …`` and exit non-zero; ``--debug`` shows the traceback. A
closed pipe (``mindory export BOOK | head``) ends quietly with status 141, as a shell
command killed by SIGPIPE does.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

__all__ = ["COMMANDS", "main"]

# name -> (module, attribute, the short help `mindory --help` shows without importing it;
# tests/cli/test_cli.py checks each equals the command's own).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "annotations": (
        "mindory.cli.annotations",
        "annotations_group",
        "Export or import your highlights as W3C Web Annotations (JSON-LD).",
    ),
    "blocks": (
        "mindory.cli.books",
        "blocks",
        "Show a section's render blocks (paragraphs, headings, ...), a page at a time.",
    ),
    "bookmarks": (
        "mindory.cli.readers",
        "bookmarks",
        "List your bookmarks in BOOK, add one (--add ...) or delete one (--delete ID).",
    ),
    "books": ("mindory.cli.books", "books", "List the books in the library."),
    "chunk": (
        "mindory.cli.chunk",
        "chunk",
        "Chunk one book (EPUB or plain text) without a library and print the chunks.",
    ),
    "chunks": ("mindory.cli.books", "chunks", "List a book's chunks with their exact spans."),
    "copy": (
        "mindory.cli.copy",
        "copy",
        "Copy the whole library into another (empty) database (PostgreSQL) and verify it.",
    ),
    "delete": ("mindory.cli.books", "delete", "Delete a book and everything derived from it."),
    "embed": (
        "mindory.cli.search",
        "embed",
        "Embed the chunks that have no vector yet (current derivations), then update the index.",
    ),
    "eval": (
        "mindory.cli.search",
        "eval_",
        "Retrieval quality on a query set: recall@1/5/10 and MRR per mode, completeness.",
    ),
    "export": (
        "mindory.cli.books",
        "export",
        "Export a book as JSON lines: book, TOC, sections (texts and maps), blocks, chunks.",
    ),
    "highlight": (
        "mindory.cli.annotations",
        "highlight",
        "Add a highlight by quote (through quote calibration) or delete one.",
    ),
    "highlights": (
        "mindory.cli.annotations",
        "highlights",
        "List your highlights in BOOK, in reading order (orphans last).",
    ),
    "import": (
        "mindory.cli.books",
        "import_",
        "Import books: files, or folders searched recursively for .txt and .epub.",
    ),
    "index": (
        "mindory.cli.search",
        "index",
        "Bring the word index and the vector index up to date (repair or rebuild them).",
    ),
    "locate": (
        "mindory.cli.search",
        "locate",
        "Where a place is: a CFI or an offset → section, block, page, chunks.",
    ),
    "position": (
        "mindory.cli.readers",
        "position",
        "Show where you are in BOOK, or set it (--set CFI, or --section N --offset N).",
    ),
    "search": (
        "mindory.cli.search",
        "search",
        "Search the library; every hit comes with its exact place.",
    ),
    "serve": (
        "mindory.server.serve",
        "serve",
        "Serve the library over HTTP: the JSON API, its docs at /docs, a reader at /.",
    ),
    "show": (
        "mindory.cli.books",
        "show",
        "Show a book: metadata, derivations and sections (BOOK: id, id prefix or title).",
    ),
    "stats": (
        "mindory.cli.evidence",
        "stats_command",
        "Chunk statistics of BOOK (a library book or a file) under each strategy.",
    ),
    "sweep": (
        "mindory.cli.evidence",
        "sweep_command",
        "Measure recall@k, MRR and answer completeness for each chunking setting.",
    ),
    "users": (
        "mindory.cli.readers",
        "users",
        "Readers of this library: add (prints a token once), passwd, list, remove.",
    ),
    "verify": (
        "mindory.cli.books",
        "verify",
        "Check every stored invariant (all books, or one); exit 1 naming the first violations.",
    ),
    "where": ("mindory.cli.books", "where", "Print which library the other commands use."),
    "worker": (
        "mindory.cli.worker",
        "worker",
        "Run queued import jobs from the library's database until stopped.",
    ),
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mindory")
    except PackageNotFoundError:  # a bare checkout on sys.path
        return "unknown"


def _pipe_closed() -> None:
    """The reader of our output went away: exit quietly with SIGPIPE's shell status.
    stdout is pointed at /dev/null first, so the final flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(141)


# The library-wide options, also accepted after any command or subcommand (as in
# sqlite-utils and llm): `mindory annotations export --user alice`. The environment
# (MINDORY_DB, MINDORY_USER) is read by the root options only; a value given on the
# command line after the command replaces the root's: the one given last wins.
_LIBRARY_OPTIONS: dict[str, tuple[str, str]] = {
    "db": ("PATH", "The library, as `mindory --db PATH` (or MINDORY_DB)."),
    "user": ("NAME", "Act for this reader, as `mindory --user NAME` (or MINDORY_USER)."),
}


def _keep_in_root(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    from click.core import ParameterSource

    if value is None or ctx.get_parameter_source(param.name or "") != ParameterSource.COMMANDLINE:
        return
    assert param.name is not None
    ctx.find_root().ensure_object(dict)[param.name.removeprefix("library_")] = value


def _take_library_options(command: click.Command) -> None:
    """Give ``command`` (and every subcommand of a group) ``--db`` and ``--user``, unless
    it has an option of that name already (``serve --db``). Idempotent."""
    taken = {o for p in command.params for o in p.opts}
    for name, (metavar, text) in _LIBRARY_OPTIONS.items():
        if f"--{name}" not in taken:
            command.params.append(
                click.Option(
                    [f"--{name}", f"library_{name}"],  # its own name: no clash with params
                    metavar=metavar,
                    expose_value=False,
                    callback=_keep_in_root,
                    help=text,
                )
            )
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _take_library_options(sub)


class _Main(click.Group):
    """Loads each command's module on first use, and turns every uncaught error into one
    line (or a traceback with --debug)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = COMMANDS.get(cmd_name)
        if found is None:
            return None
        module, attribute, _help = found
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        _take_library_options(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            _pipe_closed()
        except KeyboardInterrupt:
            click.echo("mindory: interrupted", err=True)
            sys.exit(130)
        except Exception as exc:  # noqa: BLE001 - the one place errors become messages
            from mindory.cli.common import fail

            fail(exc, bool(ctx.params.get("debug")))


@click.group(cls=_Main)
@click.version_option(version=None, package_name="mindory", message="mindory %(version)s")
@click.option(
    "--db",
    "db",
    envvar="MINDORY_DB",
    metavar="PATH",
    help="The library (a SQLite file or a database URL). Default: MINDORY_DB, else "
    "MINDORY_DATABASE_URL, else a library in the user data directory.",
)
@click.option(
    "--user",
    "user",
    envvar="MINDORY_USER",
    metavar="NAME",
    help="Act for this reader (see `mindory users`); default: the implicit local reader.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.pass_context
def main(ctx: click.Context, db: str | None, user: str | None, debug: bool) -> None:
    """mindory: exact places for every search hit in your books."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["db"] = db
    ctx.obj["user"] = user
