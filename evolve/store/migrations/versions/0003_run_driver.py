"""Who drives a running run: {host, pid, started}, so a killed driver's run can be told apart.

Revision ID: 0003_run_driver
Revises: 0002_bandit_arms
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_run_driver"
down_revision = "0002_bandit_arms"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("driver", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("driver")
