"""The adaptive model choice's state: one row per (run, operator @ model) arm.

Revision ID: 0002_bandit_arms
Revises: 0001_initial
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_bandit_arms"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bandit_arms",
        sa.Column("run_name", sa.String(255), nullable=False),
        sa.Column("arm", sa.String(255), nullable=False),
        sa.Column("pulls", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Double(), nullable=False),
        sa.Column("cost_usd", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("run_name", "arm", name=op.f("pk_bandit_arms")),
        sa.ForeignKeyConstraint(
            ["run_name"], ["runs.name"], name=op.f("fk_bandit_arms_run_name_runs")
        ),
    )


def downgrade() -> None:
    op.drop_table("bandit_arms")
