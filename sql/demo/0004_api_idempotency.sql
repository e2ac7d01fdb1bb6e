-- Answers of POST requests that carried an Idempotency-Key, so a retry gets the
-- first answer back instead of a second order.
CREATE TABLE IF NOT EXISTS api_idempotency (
    key           text PRIMARY KEY,
    request_hash  text NOT NULL,
    status_code   int NOT NULL,
    response_body jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
