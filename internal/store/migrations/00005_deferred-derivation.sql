-- +goose Up
-- 00005 deferred-derivation (issue 12, goal 3; FR-APR06 R1, docs/reverification.md):
-- additive and rerunnable like 00001-00004, recovery's own table only. No
-- new GRANT: the table-level privileges of docs/database-role.md cover new
-- columns. No Down section (see schema.go).
SELECT pg_advisory_xact_lock(hashtextextended('projection-recovery:migrate', 0));

-- derived_quantity, derived_avg_cost: the key's position as the last page
-- that folded every retained trade newer than the basis derived it (NULL:
-- unknown, e.g. a basis written by a repair). A page whose key still holds
-- exactly that position, and which neither inserts a trade nor verifies an
-- opening of the key, may take the fold as unchanged instead of re-reading
-- the key's newer trades; it then marks the key deferred.
-- deferred: the key's position has not been re-derived from the retained
-- trades since such a page. No page makes the scope CURRENT while a key of
-- it is deferred: the pages before the one that would re-derive every
-- deferred key in full first, under their key locks (store.flushDeferred).
ALTER TABLE projection_catchup_basis
    ADD COLUMN IF NOT EXISTS derived_quantity numeric,
    ADD COLUMN IF NOT EXISTS derived_avg_cost numeric,
    ADD COLUMN IF NOT EXISTS deferred         boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS projection_catchup_basis_deferred ON projection_catchup_basis (scope) WHERE deferred;
