-- +goose Up
-- 00003 trade-quarantine (reconciliation, docs/reconciliation.md):
-- additive and rerunnable, recovery's own tables only, every one IF NOT
-- EXISTS; never alters a base table. No Down section (see schema.go).
SELECT pg_advisory_xact_lock(hashtextextended('projection-recovery:migrate', 0));

-- quarantine_trade moves a trades row the consensus never emitted (an orphan)
-- here, column for column, so the derivation no longer folds it and a human
-- can still inspect it; its revert moves it back byte for byte. The columns
-- mirror trades exactly (same types, no defaults applied on the way back).
CREATE TABLE IF NOT EXISTS projection_trade_quarantine (
    scope          text        NOT NULL,
    trade_id       text        NOT NULL,
    trade_seq      bigint      NOT NULL,
    seq            bigint,
    instrument     text        NOT NULL,
    price          numeric     NOT NULL,
    quantity       numeric     NOT NULL,
    buy_order_id   text        NOT NULL,
    sell_order_id  text        NOT NULL,
    buy_account    text        NOT NULL,
    sell_account   text        NOT NULL,
    ts             timestamptz NOT NULL,
    booking_status text        NOT NULL,
    written_by     text        NOT NULL,
    quarantined_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, trade_id)
);

-- drop_position moves a phantom positions row (and its basis, if any) here so
-- that its revert re-inserts it exactly (numeric scale and updated_at
-- included), which the plan's decimal strings alone cannot.
CREATE TABLE IF NOT EXISTS projection_position_quarantine (
    scope            text        NOT NULL,
    account          text        NOT NULL,
    instrument       text        NOT NULL,
    opening_quantity numeric     NOT NULL,
    opening_avg_cost numeric     NOT NULL,
    opening_proven   boolean     NOT NULL,
    opening_seq      bigint,
    quantity         numeric     NOT NULL,
    avg_cost         numeric     NOT NULL,
    updated_at       timestamptz NOT NULL,
    basis_seq        bigint,
    basis_quantity   numeric,
    basis_avg_cost   numeric,
    quarantined_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, account, instrument)
);
