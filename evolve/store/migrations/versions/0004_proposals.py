"""The proposals ledger: every proposal with its outcome, and its calls grouped under it.

Revision ID: 0004_proposals
Revises: 0003_run_driver
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_proposals"
down_revision = "0003_run_driver"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "proposals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_name", sa.String(255), nullable=False),
        sa.Column("operator", sa.String(64), nullable=False),
        sa.Column("models", sa.JSON(), nullable=False),
        sa.Column("parent_ids", sa.JSON(), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("island", sa.Integer(), nullable=False),
        sa.Column("arm", sa.String(255), nullable=True),
        sa.Column("outcome", sa.String(64), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=True),
        sa.Column("nearest_id", sa.Integer(), nullable=True),
        sa.Column("similarity", sa.Double(), nullable=True),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Double(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_proposals")),
        sa.ForeignKeyConstraint(
            ["run_name"], ["runs.name"], name=op.f("fk_proposals_run_name_runs")
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"], ["candidates.id"], name=op.f("fk_proposals_parent_id_candidates")
        ),
        sa.ForeignKeyConstraint(
            ["candidate_id"], ["candidates.id"], name=op.f("fk_proposals_candidate_id_candidates")
        ),
    )
    op.create_index(op.f("ix_proposals_run_name"), "proposals", ["run_name"])
    op.create_index(op.f("ix_proposals_parent_id"), "proposals", ["parent_id"])
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("proposal_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("call_id", sa.String(32), nullable=True))
        batch.create_unique_constraint(op.f("uq_llm_calls_call_id"), ["call_id"])
        batch.add_column(
            sa.Column("cached_tokens", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("cache_write_tokens", sa.Integer(), nullable=False, server_default="0")
        )
        batch.create_foreign_key(
            op.f("fk_llm_calls_proposal_id_proposals"), "proposals", ["proposal_id"], ["id"]
        )
        batch.create_index(op.f("ix_llm_calls_proposal_id"), ["proposal_id"])


def downgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_index(op.f("ix_llm_calls_proposal_id"))
        batch.drop_constraint(op.f("fk_llm_calls_proposal_id_proposals"), type_="foreignkey")
        batch.drop_constraint(op.f("uq_llm_calls_call_id"), type_="unique")
        batch.drop_column("call_id")
        batch.drop_column("cache_write_tokens")
        batch.drop_column("cached_tokens")
        batch.drop_column("proposal_id")
    op.drop_index(op.f("ix_proposals_parent_id"), "proposals")
    op.drop_index(op.f("ix_proposals_run_name"), "proposals")
    op.drop_table("proposals")
