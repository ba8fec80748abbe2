"""monitoring: status events (kept by triggers), replicas' resource use, idle-GPU action per queue,
attempts' queue and admission wait

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# One trigger per table keeps every status change, whoever makes it: no write path can forget one.
# ``status_by`` is set by the same UPDATE that moves the status (Store._cas, PipelineStore.move_run).
_SQLITE = """
CREATE TRIGGER {name}_created AFTER INSERT ON {table} BEGIN
  INSERT INTO events (kind, object_id, ts, old_status, new_status, reason, actor)
  VALUES ('{kind}', NEW.id, NEW.created_at, NULL, NEW.status, NEW.reason, COALESCE(NEW.status_by, 'user'));
END;
CREATE TRIGGER {name}_moved AFTER UPDATE OF status ON {table} WHEN OLD.status IS NOT NEW.status BEGIN
  INSERT INTO events (kind, object_id, ts, old_status, new_status, reason, actor)
  VALUES ('{kind}', NEW.id, NEW.updated_at, OLD.status, NEW.status, NEW.reason, COALESCE(NEW.status_by, 'system'));
END;
"""

_POSTGRES = """
CREATE FUNCTION {name}_event() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO events (kind, object_id, ts, old_status, new_status, reason, actor)
    VALUES ('{kind}', NEW.id, NEW.created_at, NULL, NEW.status, NEW.reason, COALESCE(NEW.status_by, 'user'));
  ELSIF NEW.status IS DISTINCT FROM OLD.status THEN
    INSERT INTO events (kind, object_id, ts, old_status, new_status, reason, actor)
    VALUES ('{kind}', NEW.id, NEW.updated_at, OLD.status, NEW.status, NEW.reason, COALESCE(NEW.status_by, 'system'));
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER {name}_event AFTER INSERT OR UPDATE OF status ON {table}
  FOR EACH ROW EXECUTE FUNCTION {name}_event();
"""

_WATCHED = (("job", "jobs", "trainyard_job"), ("pipeline_run", "pipeline_runs", "trainyard_run"))


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("object_id", sa.String(40), nullable=False),
        sa.Column("ts", sa.Float, nullable=False),
        sa.Column("old_status", sa.String(16)),
        sa.Column("new_status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("actor", sa.String(32), nullable=False),
    )
    op.create_index("ix_events_kind_object_id", "events", ["kind", "object_id", "id"])
    op.create_table(
        "replica_usage",
        sa.Column("attempt_id", sa.String(48), primary_key=True),
        sa.Column("replica", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("job_id", sa.String(40), nullable=False, index=True),
        sa.Column("samples", sa.Integer, nullable=False),
        sa.Column("cpu_percent", sa.Float),
        sa.Column("memory_bytes", sa.BigInteger),
        sa.Column("peak_memory_bytes", sa.BigInteger),
        sa.Column("gpu_util", sa.Float),
        sa.Column("gpu_memory_bytes", sa.BigInteger),
        sa.Column("gpu_util_sum", sa.Float, nullable=False),
        sa.Column("gpu_samples", sa.Integer, nullable=False),
        sa.Column("gpu_low_since", sa.Float),
        sa.Column("idle_flagged_at", sa.Float),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    with op.batch_alter_table("jobs") as b:
        b.add_column(sa.Column("status_by", sa.String(32)))
    # what a /metrics scrape reads, each from an index alone: jobs by queue and status (and the oldest
    # pending), attempts' admission waits and outcomes by queue
    op.create_index("ix_jobs_status_queue", "jobs", ["status", "queue", "created_at"])
    with op.batch_alter_table("attempts") as b:
        b.add_column(sa.Column("queue", sa.String(63)))
        b.add_column(sa.Column("wait", sa.Float))
    op.execute("UPDATE attempts SET queue = (SELECT jobs.queue FROM jobs WHERE jobs.id = attempts.job_id)")
    op.execute("UPDATE attempts SET wait = created_at - (SELECT jobs.created_at FROM jobs WHERE jobs.id = attempts.job_id)"
               " WHERE number = 1")
    op.create_index("ix_attempts_queue_wait", "attempts", ["queue", "wait"])
    op.create_index("ix_attempts_queue_outcome", "attempts", ["queue", "reason", "status", "preempted_by"])
    with op.batch_alter_table("pipeline_runs") as b:
        b.add_column(sa.Column("status_by", sa.String(32)))
    with op.batch_alter_table("queues") as b:
        b.add_column(sa.Column("idle_gpu_action", sa.String(8)))
    dialect = op.get_bind().dialect.name
    template = _POSTGRES if dialect == "postgresql" else _SQLITE
    for kind, table, name in _WATCHED:
        sql = template.format(kind=kind, table=table, name=name)
        if dialect == "postgresql":
            op.execute(sql)
        else:  # sqlite3 runs one statement per call; a trigger body ends at its END;
            for stmt in sql.split("END;"):
                if stmt.strip():
                    op.execute(stmt + "END;")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for _, table, name in _WATCHED:
        if dialect == "postgresql":
            op.execute(f"DROP TRIGGER IF EXISTS {name}_event ON {table}")
            op.execute(f"DROP FUNCTION IF EXISTS {name}_event()")
        else:
            op.execute(f"DROP TRIGGER IF EXISTS {name}_created")
            op.execute(f"DROP TRIGGER IF EXISTS {name}_moved")
    with op.batch_alter_table("queues") as b:
        b.drop_column("idle_gpu_action")
    with op.batch_alter_table("pipeline_runs") as b:
        b.drop_column("status_by")
    op.drop_index("ix_attempts_queue_outcome", "attempts")
    op.drop_index("ix_attempts_queue_wait", "attempts")
    with op.batch_alter_table("attempts") as b:
        b.drop_column("wait")
        b.drop_column("queue")
    op.drop_index("ix_jobs_status_queue", "jobs")
    with op.batch_alter_table("jobs") as b:
        b.drop_column("status_by")
    op.drop_table("replica_usage")
    op.drop_index("ix_events_kind_object_id", "events")
    op.drop_table("events")
