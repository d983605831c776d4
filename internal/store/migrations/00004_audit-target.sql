-- +goose Up
-- 00004 audit-target (reconciliation, "Rollback and recovery" 3): a
-- reconciliation.repaired record carries the whole action a handler's revert
-- reads, so a successful apply can be rolled back from the audit trail alone.
-- Additive and rerunnable like 00001-00003: ADD COLUMN IF NOT EXISTS on
-- recovery's own table, every new column nullable with no default, so a
-- record written before this migration keeps NULL there and is refused as a
-- rollback source (it says what changed, not where) rather than guessed.
-- No new GRANT: the table-level SELECT, INSERT of docs/database-role.md
-- cover new columns. No Down section (see schema.go).
SELECT pg_advisory_xact_lock(hashtextextended('projection-recovery:migrate', 0));

-- target: the record identity plus scope and table (recon.Action.Target).
-- before_absent / after_absent: the record was absent before / is removed
-- after (recon.Fields nil); before and after hold {} then. Without them an
-- absent record and an empty one read back alike, and the revert of a
-- drop_position (After absent) would compare the row with {} and refuse.
-- reversible, rollback: an irreversible action is returned to the human
-- with its rollback text instead of being reverted.
ALTER TABLE projection_reconciliation_audit
    ADD COLUMN IF NOT EXISTS target          jsonb,
    ADD COLUMN IF NOT EXISTS before_absent   boolean,
    ADD COLUMN IF NOT EXISTS after_absent    boolean,
    ADD COLUMN IF NOT EXISTS lifecycle_event text,
    ADD COLUMN IF NOT EXISTS reversible      boolean,
    ADD COLUMN IF NOT EXISTS risk            text,
    ADD COLUMN IF NOT EXISTS rollback        text;
