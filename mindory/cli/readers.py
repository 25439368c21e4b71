"""Readers, reading positions and bookmarks (docs/reading-state.md): ``mindory users``,
``mindory position``, ``mindory bookmarks``. Each is a thin door onto one Library method
and prints, with ``--json``, the same shapes as the HTTP API. ``mindory --user NAME`` (or
``MINDORY_USER``) acts for that reader; without it, for the implicit local reader."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from mindory.cli.common import console, library, print_json

if TYPE_CHECKING:
    from mindory.reading.positions import PlaceIn


def reader(ctx: click.Context) -> str | None:
    """The id of the reader ``--user`` names (None: the local reader)."""
    name = ctx.find_root().ensure_object(dict).get("user")
    return library(ctx).reader_id(name) if name else None


def _place(
    cfi: str | None,
    section: int | None,
    offset: int | None,
    utf16: bool,
    progression: float | None,
) -> PlaceIn:
    from mindory.reading.positions import PlaceIn

    return PlaceIn(
        cfi=cfi,
        section=section,
        offset=offset,
        unit="utf16" if utf16 else "codepoint",
        progression=progression,
    )


def _where(out: dict[str, Any]) -> str:
    loc = out.get("locator")
    if loc is None:
        return f"orphaned (was section {out['orphanedFrom']['section']})"
    cfi = loc["locations"].get("cfi")
    places = f"section {loc['section']}, offset {loc['source']['start']}"
    pct = f"{100 * loc['locations']['totalProgression']:.1f} %"
    return f"{places} ({pct})" + (f"  {cfi}" if cfi else "")


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:40] + ("…" if len(flat) > 40 else "")


# --------------------------------------------------------------------------- users


@click.group()
def users() -> None:
    """Readers of this library: add (prints a token once), passwd, list, remove."""


@users.command("add")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the reader and token as JSON.")
@click.pass_context
def users_add(ctx: click.Context, name: str, as_json: bool) -> None:
    """Add a reader; their token is printed this once (only its hash is stored)."""
    made = library(ctx).add_reader(name)
    if as_json:
        print_json(made.to_json())
        return
    click.echo(made.token)
    click.echo(
        f"mindory: added reader {made.reader.name!r}; the line above is their token, shown "
        "only now (send it as Authorization: Bearer <token>)",
        err=True,
    )


@users.command("passwd")
@click.argument("name")
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password from standard input (its first line) instead of asking.",
)
@click.pass_context
def users_passwd(ctx: click.Context, name: str, password_stdin: bool) -> None:
    """Set a reader's password: HTTP Basic on the OPDS catalogue and KOReader's sync
    (only a salted scrypt hash of it is stored)."""
    lib = library(ctx)
    lib.reader_id(name)  # a missing reader is an error before any question
    if password_stdin:
        line = sys.stdin.readline()
        password = line[:-1] if line.endswith("\n") else line
        password = password[:-1] if password.endswith("\r") else password
    else:
        password = click.prompt(
            f"Password for {name}", hide_input=True, confirmation_prompt=True, err=True
        )
    if not password:
        raise click.UsageError("the password is empty")
    lib.set_password(name, password)
    click.echo(
        f"mindory: {name!r} can now sign in with this password (OPDS apps: HTTP Basic; "
        "KOReader: progress sync at /kosync)",
        err=True,
    )


@users.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def users_list(ctx: click.Context, as_json: bool) -> None:
    """List the readers (the implicit local reader is not one of them)."""
    found = library(ctx).readers()
    if as_json:
        print_json([r.to_json() for r in found])
        return
    if not found:
        click.echo("no readers: everything is the implicit local reader's", err=True)
    for r in found:
        click.echo(f"{r.name}\t{r.id}\t{r.created.isoformat(timespec='seconds')}")


@users.command("remove")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Remove without asking.")
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
@click.pass_context
def users_remove(ctx: click.Context, name: str, yes: bool, as_json: bool) -> None:
    """Remove a reader and their highlights, positions and bookmarks (asks first)."""
    lib = library(ctx)
    lib.reader_id(name)  # a missing reader is an error before any question
    if not yes and not click.confirm(
        f"Remove reader {name!r} with all their highlights, positions and bookmarks?",
        default=False,
        err=True,
    ):
        click.echo("mindory: nothing removed", err=True)
        sys.exit(1)
    gone = lib.remove_reader(name)
    if as_json:
        print_json(gone.to_json())
    else:
        click.echo(
            f"removed reader {name!r} with {gone.highlights} highlights, {gone.positions} "
            f"positions and {gone.bookmarks} bookmarks"
        )


# --------------------------------------------------------------------------- positions


@click.command()
@click.argument("book")
@click.option("--set", "cfi", metavar="CFI", help="Set the position to this EPUB CFI.")
@click.option("--section", type=click.IntRange(0), help="Set it in this section ...")
@click.option(
    "--offset",
    type=click.IntRange(0),
    help="... at this offset (book source coordinates: plain text counts from the file's start).",
)
@click.option("--utf16", is_flag=True, help="--offset counts UTF-16 units.")
@click.option("--device", default="cli", show_default=True, help="The device to record.")
@click.option("--json", "as_json", is_flag=True, help="Print the position as JSON (as HTTP).")
@click.pass_context
def position(
    ctx: click.Context,
    book: str,
    cfi: str | None,
    section: int | None,
    offset: int | None,
    utf16: bool,
    device: str,
    as_json: bool,
) -> None:
    """Show where you are in BOOK, or set it (--set CFI, or --section N --offset N)."""
    lib = library(ctx)
    who = reader(ctx)
    if cfi is not None or section is not None or offset is not None:
        if offset is not None and section is None:
            raise click.UsageError("--offset needs --section")
        found = lib.set_position(
            book,
            _place(cfi, section, offset, utf16, None),
            device=device,
            modified=datetime.now(UTC),
            reader=who,
        )
    else:
        found = lib.position(book, reader=who)
    out = found.to_json()
    if as_json:
        print_json(out)
        return
    console().print(
        f"{_where(out)}  on {found.device}, {out['modified']}  “{_snippet(found.exact)}”",
        highlight=False,
        markup=False,
    )


@click.command()
@click.argument("book")
@click.option("--add", "add", is_flag=True, help="Add a bookmark at --cfi / --section ...")
@click.option("--cfi", metavar="CFI", help="The place to bookmark: an EPUB CFI ...")
@click.option("--section", type=click.IntRange(0), help="... or a section ...")
@click.option("--offset", type=click.IntRange(0), help="... and an offset (book coordinates),")
@click.option("--progression", type=click.FloatRange(0, 1), help="... or a progression (0–1).")
@click.option("--utf16", is_flag=True, help="--offset counts UTF-16 units.")
@click.option("--title", help="The bookmark's title.")
@click.option("--delete", "delete", metavar="ID", help="Delete the bookmark with this id.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as HTTP).")
@click.pass_context
def bookmarks(
    ctx: click.Context,
    book: str,
    add: bool,
    cfi: str | None,
    section: int | None,
    offset: int | None,
    progression: float | None,
    utf16: bool,
    title: str | None,
    delete: str | None,
    as_json: bool,
) -> None:
    """List your bookmarks in BOOK, add one (--add ...) or delete one (--delete ID)."""
    lib = library(ctx)
    who = reader(ctx)
    if add and delete is not None:
        raise click.UsageError("give --add or --delete, not both")
    if add:
        made = lib.add_bookmark(
            book, _place(cfi, section, offset, utf16, progression), title=title, reader=who
        )
        shown = [made.to_json()]
    elif delete is not None:
        shown = [lib.delete_bookmark(book, delete, reader=who).to_json()]
    else:
        if cfi is not None or section is not None or offset is not None or title is not None:
            raise click.UsageError("a place or --title needs --add")
        shown = [b.to_json() for b in lib.bookmarks(book, reader=who)]
    if as_json:
        print_json(shown[0] if add or delete is not None else shown)
        return
    verb = "added " if add else "deleted " if delete is not None else ""
    for b in shown:
        label = f"  {b['title']}" if b["title"] else ""
        console().print(
            f"{verb}{b['id']}  {_where(b)}{label}  “{_snippet(b['quote']['exact'])}”",
            highlight=False,
            markup=False,
        )
