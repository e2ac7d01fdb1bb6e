-- The business table of the demo (`api run`, deploy/handlers/orders.yaml):
-- applied by `eventforge migrate --demo` only. Databases migrated before the
-- demo had its own set already have it (0001_schema created it then).
CREATE TABLE IF NOT EXISTS orders (
    id         text PRIMARY KEY,
    status     text NOT NULL,
    customer   text,
    amount     bigint,
    currency   text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
