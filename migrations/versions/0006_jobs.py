"""jobs: import jobs as rows, so any process on the same database can run them.

``jobs`` holds one row per import job: its ``kind`` (``upload`` | ``folder``), its
``state`` (``queued`` → ``running`` → ``succeeded`` | ``failed``), the request as JSON
(the file to import, the settings, copy/replaces/embed), the progress (``phase``,
``done``, ``total``, ``progress``), the result or the error as JSON, and what a worker
needs to claim it safely: ``attempts`` / ``max_attempts`` and a lease (``lease_owner``,
``lease_expires_at``) that the running worker renews; a job whose lease has expired is
claimed again by another worker (docs/api.md, "Jobs"). ``version`` grows with every
change (what the server-sent events follow). The index on (state, created_at) is the
claim's queue order.

Written with portable operations only (PostgreSQL runs it as it is).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("file_name", sa.Text(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("phase", sa.String(length=32), nullable=True),
        sa.Column("done", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(length=128), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index(op.f("ix_jobs_state_created_at"), "jobs", ["state", "created_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_jobs_state_created_at"), table_name="jobs")
    op.drop_table("jobs")
