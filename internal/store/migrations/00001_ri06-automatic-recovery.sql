-- +goose Up
-- 00001 ri06-automatic-recovery (NFR-APR01): additive and rerunnable. Creates
-- only recovery's own objects, every one IF NOT EXISTS; never alters, drops or
-- rewrites a base table, so applying it twice, or to a database already
-- holding live data or the tables a previous release created with its
-- hand-rolled script (same definitions), loses nothing: an existing table is
-- adopted as it is. There is deliberately no Down section: recovery's schema
-- is never downgraded (see schema.go).

-- A previous release serialised its hand-rolled script on this transaction-
-- level advisory lock, not on goose's session lock. Taking it too keeps a new
-- and an old manager starting together on a fresh database from racing on
-- the catalog (CREATE ... IF NOT EXISTS alone is not safe concurrently).
SELECT pg_advisory_xact_lock(hashtextextended('projection-recovery:migrate', 0));

-- FR-APR05: the completeness cursor. verified_through_seq/chain_digest are the
-- only completeness claim; projection_runs.checkpoint_seq never is.
CREATE TABLE IF NOT EXISTS projection_catchup_cursor (
    scope                      text        PRIMARY KEY,
    descriptor_hash            text,
    protocol_version           integer,
    verified_through_seq       bigint      NOT NULL DEFAULT 0,
    chain_digest               text        NOT NULL DEFAULT '0000000000000000000000000000000000000000000000000000000000000000',
    event_count                bigint      NOT NULL DEFAULT 0,
    last_observed_boundary_seq bigint      NOT NULL DEFAULT 0,
    state                      text        NOT NULL DEFAULT 'CATCHING_UP'
        CHECK (state IN ('CATCHING_UP', 'CURRENT', 'RETRYING', 'BLOCKED')),
    blocked_reason             text,
    last_verified_at           timestamptz,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now()
);

-- FR-APR08: one lease row per scope; the fence increments on takeover by a new
-- owner or after expiry.
CREATE TABLE IF NOT EXISTS projection_catchup_lease (
    scope       text        PRIMARY KEY,
    owner       text        NOT NULL,
    fence       bigint      NOT NULL,
    expires_at  timestamptz NOT NULL,
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL
);

-- FR-APR06 R1 (performance, not trust): the authoritative fold of each key
-- over the trades with seq <= basis_seq (the cursor when it last touched the
-- key). A page folds only trades newer than the cursor onto it instead of
-- re-reading the key's whole history; it is deleted and rebuilt from genesis
-- whenever a cursor is (re)created (FR-APR07).
CREATE TABLE IF NOT EXISTS projection_catchup_basis (
    scope      text    NOT NULL,
    account    text    NOT NULL,
    instrument text    NOT NULL,
    basis_seq  bigint  NOT NULL,
    quantity   numeric NOT NULL,
    avg_cost   numeric NOT NULL,
    PRIMARY KEY (scope, account, instrument)
);

-- FR-APR06 R2: position notifications written in the page transaction and
-- published after commit by internal/notify (at-least-once; msg_id is the
-- idempotency key sent as Nats-Msg-Id).
CREATE TABLE IF NOT EXISTS projection_catchup_outbox (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    msg_id      text        NOT NULL UNIQUE,
    scope       text        NOT NULL,
    account     text        NOT NULL,
    instrument  text        NOT NULL,
    quantity    numeric     NOT NULL,
    avg_cost    numeric     NOT NULL,
    cursor_seq  bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz
);
CREATE INDEX IF NOT EXISTS projection_catchup_outbox_unsent ON projection_catchup_outbox (id) WHERE sent_at IS NULL;
