"""Each model call's charge against the budgets, apart from the usage its reply reported.

Calls stored before this migration were written once answered: their charge is their usage.

Revision ID: 0005_charges
Revises: 0004_proposals
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_charges"
down_revision = "0004_proposals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(
            sa.Column("charged_tokens", sa.BigInteger(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("charged_usd", sa.Double(), nullable=False, server_default="0"))
    op.execute(
        "UPDATE llm_calls SET charged_tokens = input_tokens + output_tokens, charged_usd = cost_usd"
    )


def downgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("charged_usd")
        batch.drop_column("charged_tokens")
