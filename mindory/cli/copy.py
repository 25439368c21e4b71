"""``mindory copy --to URL``: the library of ``--db`` copied into another database."""

from __future__ import annotations

import sys

import click

from mindory.cli.common import console, library, print_json

__all__ = ["copy"]


@click.command()
@click.option(
    "--to",
    "target",
    required=True,
    metavar="URL",
    help="The new library: postgresql+psycopg://USER@HOST/DB (or a SQLite path).",
)
@click.option("--no-verify", is_flag=True, help="Do not run verify on the copy.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def copy(ctx: click.Context, target: str, no_verify: bool, as_json: bool) -> None:
    """Copy the whole library into another (empty) database (PostgreSQL) and verify it."""
    report = library(ctx).copy_to(target, verify=not no_verify)
    if as_json:
        print_json(report.to_json())
    else:
        total = sum(report.rows.values())
        console().print(
            f"copied {report.rows.get('books', 0)} book(s), {report.rows.get('chunks', 0)} "
            f"chunks, {total} rows to {report.target} in {report.seconds:.1f} s"
        )
    if no_verify:
        return
    if report.verified:
        if not as_json:
            console().print("[green]verify: ok[/green]")
        return
    for problem in report.problems[:20]:
        click.echo(f"mindory: violation: {problem}", err=True)
    click.echo(f"mindory: error: verify found {len(report.problems)} violation(s)", err=True)
    sys.exit(1)
