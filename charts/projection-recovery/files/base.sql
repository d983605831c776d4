-- Base tables of the existing trade-processor. In production they already
-- exist; EnsureBaseSchema creates them for tests and the demo. Recovery READS
-- projection_runs and never writes it (FR-APR09). Rows whose consensus seq is
-- NULL carry no provenance: unknown legacy history, which recovery refuses.

CREATE TABLE IF NOT EXISTS projection_runs (
    run_id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope                      text        NOT NULL,
    epoch                      integer     NOT NULL DEFAULT 1,        -- 1 = epoch-v1
    managed                    boolean     NOT NULL DEFAULT true,
    selected                   boolean     NOT NULL DEFAULT false,
    phase                      text        NOT NULL
        CHECK (phase IN ('PENDING', 'ACTIVE', 'DRAINING', 'SEALED', 'ABANDONED')),
    descriptor_hash            text        NOT NULL,
    protocol_version           integer     NOT NULL,
    frozen_seq                 bigint,                                -- set when DRAINING
    checkpoint_seq             bigint      NOT NULL DEFAULT 0,        -- max observed seq, NEVER completeness
    -- explicit-recovery checkpoint: an identity cross-check only (FR-APR07)
    recovery_checkpoint_seq              bigint,
    recovery_checkpoint_digest           text,
    recovery_checkpoint_descriptor_hash  text,
    recovery_checkpoint_protocol_version integer,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now()
);
-- At most one selected run per scope.
CREATE UNIQUE INDEX IF NOT EXISTS projection_runs_selected ON projection_runs (scope) WHERE selected;

CREATE TABLE IF NOT EXISTS trades (
    scope          text        NOT NULL,
    trade_id       text        NOT NULL,
    trade_seq      bigint      NOT NULL,         -- engine trade sequence
    seq            bigint,                       -- consensus seq; NULL = unknown legacy
    instrument     text        NOT NULL,
    price          numeric     NOT NULL,
    quantity       numeric     NOT NULL,
    buy_order_id   text        NOT NULL,
    sell_order_id  text        NOT NULL,
    buy_account    text        NOT NULL,
    sell_account   text        NOT NULL,
    ts             timestamptz NOT NULL,         -- microseconds (source carries ns)
    booking_status text        NOT NULL DEFAULT 'BOOKED',   -- BOOKED / REJECTED / ...
    written_by     text        NOT NULL DEFAULT 'live',     -- live / recovery
    PRIMARY KEY (scope, trade_id)
);
CREATE INDEX IF NOT EXISTS trades_scope_seq ON trades (scope, seq, trade_seq);
CREATE INDEX IF NOT EXISTS trades_buy_key ON trades (scope, buy_account, instrument, seq);
CREATE INDEX IF NOT EXISTS trades_sell_key ON trades (scope, sell_account, instrument, seq);

CREATE TABLE IF NOT EXISTS orders (
    scope      text        NOT NULL,
    order_id   text        NOT NULL,
    version    bigint      NOT NULL,             -- current (newest) version
    seq        bigint,                           -- consensus seq of that version; NULL = legacy
    account    text        NOT NULL,
    instrument text        NOT NULL,
    side       text        NOT NULL,
    price      numeric     NOT NULL,
    quantity   numeric     NOT NULL,
    remaining  numeric     NOT NULL,
    status     text        NOT NULL,
    ts         timestamptz NOT NULL,
    PRIMARY KEY (scope, order_id)
);
CREATE INDEX IF NOT EXISTS orders_scope_seq ON orders (scope, seq);

CREATE TABLE IF NOT EXISTS order_events (
    scope      text        NOT NULL,
    order_id   text        NOT NULL,
    version    bigint      NOT NULL,
    seq        bigint,                           -- NULL = legacy
    account    text        NOT NULL,
    instrument text        NOT NULL,
    side       text        NOT NULL,
    price      numeric     NOT NULL,
    quantity   numeric     NOT NULL,
    remaining  numeric     NOT NULL,
    status     text        NOT NULL,
    ts         timestamptz NOT NULL,
    PRIMARY KEY (scope, order_id, version)
);
CREATE INDEX IF NOT EXISTS order_events_scope_seq ON order_events (scope, seq);

CREATE TABLE IF NOT EXISTS positions (
    scope             text    NOT NULL,
    account           text    NOT NULL,
    instrument        text    NOT NULL,
    opening_quantity  numeric NOT NULL DEFAULT 0,
    opening_avg_cost  numeric NOT NULL DEFAULT 0,
    opening_proven    boolean NOT NULL DEFAULT false, -- false = unproven initial balance
    opening_seq       bigint,                         -- seq of the opening event, if any
    quantity          numeric NOT NULL,
    avg_cost          numeric NOT NULL,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, account, instrument)
);
