-- +goose Up
-- 00006 written-as (reconciliation rollback; NFR-APR01, docs/database-role.md):
-- additive and rerunnable like 00001-00005. A rollback rebuilds its actions
-- from the journal and the audit trail and reverts them as the repair role
-- (projection_reconciliation), which may DELETE projection rows; a row that a
-- role with fewer rights wrote must never choose those reverts. No Down
-- section (see schema.go).
SELECT pg_advisory_xact_lock(hashtextextended('projection-recovery:migrate', 0));

-- written_as: the database role each row was written as. A column default,
-- so no statement can forget it (the writers never name the column). A
-- rollback (reconstore.RollbackRun) reads only rows written as its own
-- session's role and refuses a run holding any other (records_untrusted).
-- PostgreSQL evaluates the default once for the rows already there: they
-- read as the role running this migration (the migrator, never the repair
-- role in the documented setup), so a run applied before 00006 is refused as
-- a rollback source instead of trusted unproven.
ALTER TABLE projection_reconciliation_journal
    ADD COLUMN IF NOT EXISTS written_as text NOT NULL DEFAULT current_user;
ALTER TABLE projection_reconciliation_audit
    ADD COLUMN IF NOT EXISTS written_as text NOT NULL DEFAULT current_user;

-- The recovery worker's role runs nothing that writes either table, yet the
-- grants before 00006 let it INSERT there, and a row may name any written_as
-- it likes when its writer may INSERT. An upgraded database loses every
-- right of that role on both tables but SELECT here; a fresh one never gets
-- more (docs/database-role.md, applied after `manager migrate`). Skipped
-- where the role does not exist (a disposable single-role setup).
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'projection_recovery') THEN
        REVOKE ALL ON projection_reconciliation_journal, projection_reconciliation_audit FROM projection_recovery;
        GRANT SELECT ON projection_reconciliation_journal, projection_reconciliation_audit TO projection_recovery;
    END IF;
END
$$;
-- +goose StatementEnd
