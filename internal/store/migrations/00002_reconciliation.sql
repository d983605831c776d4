-- +goose Up
-- 00002 reconciliation: recovery's reconciliation records (runs, journal,
-- audit). Additive and rerunnable like 00001 (NFR-APR01): only CREATE ... IF
-- NOT EXISTS, nothing on a base table, no Down section. These tables hold
-- what reconciliation did and why; the projection itself is written only by
-- the repair handlers, under the page's write lock and fenced lease.

SELECT pg_advisory_xact_lock(hashtextextended('projection-recovery:migrate', 0));

-- One dry run (detect -> explain -> plan). A row is written at every
-- lifecycle transition, so a run whose manager crashed stays in the state it
-- reached (collecting, analyzing) and is inspectable like a job. report and
-- plan are the run's outputs (NULL until reported); error is why a failed or
-- cancelled run ended (code and detail).
CREATE TABLE IF NOT EXISTS projection_reconciliation_runs (
    id             text        PRIMARY KEY,
    scope          text        NOT NULL,
    correlation_id text        NOT NULL,
    state          text        NOT NULL
        CHECK (state IN ('pending', 'collecting', 'analyzing', 'reported', 'failed', 'cancelled')),
    code           text,
    error          text,
    findings       integer     NOT NULL DEFAULT 0,
    clean          boolean     NOT NULL DEFAULT false,
    plan_id        text,
    report         jsonb,
    plan           jsonb,
    started_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS projection_reconciliation_runs_scope ON projection_reconciliation_runs (scope, started_at);

-- The journal of an apply or a rollback: one row per step, committed before
-- the next action runs, so a crashed apply can be rolled back from these
-- rows alone. (correlation_id, position) orders the steps of one run.
CREATE TABLE IF NOT EXISTS projection_reconciliation_journal (
    correlation_id text        NOT NULL,
    position       integer     NOT NULL,
    plan_id        text        NOT NULL,
    scope          text        NOT NULL,
    state          text        NOT NULL
        CHECK (state IN ('applied', 'reverted', 'revert_failed')),
    action_id      text        NOT NULL,
    action         jsonb       NOT NULL,
    error          text,
    at             timestamptz NOT NULL,
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (correlation_id, position)
);

-- reconciliation.repaired audit records: one per applied, reverted, refused
-- or failed action, with primitive before/after values (enough to roll back
-- from the audit trail alone). Append-only: the runtime role may not change
-- or remove a record (docs/database-role.md grants it SELECT, INSERT only).
CREATE TABLE IF NOT EXISTS projection_reconciliation_audit (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action         text        NOT NULL,
    correlation_id text        NOT NULL,
    plan_id        text        NOT NULL,
    scope          text        NOT NULL,
    action_id      text        NOT NULL,
    kind           text        NOT NULL,
    outcome        text        NOT NULL
        CHECK (outcome IN ('applied', 'reverted', 'revert_failed', 'failed', 'refused')),
    code           text,
    reason         text,
    before         jsonb       NOT NULL,
    after          jsonb       NOT NULL,
    principal      text        NOT NULL,
    at             timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS projection_reconciliation_audit_correlation ON projection_reconciliation_audit (correlation_id, id);
