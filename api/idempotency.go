package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// idempotencyKey is an Idempotency-Key header with the hash of the validated
// request it came with.
type idempotencyKey struct{ key, hash string }

// claimKey inserts the key's row. When the key exists already it returns the
// stored answer (claimed false), or errKeyReused if the request differs.
func claimKey(ctx context.Context, tx pgx.Tx, k idempotencyKey) (answer, bool, error) {
	tag, err := tx.Exec(ctx,
		`INSERT INTO api_idempotency (key, request_hash, status_code, response_body)
		 VALUES ($1, $2, 0, '{}') ON CONFLICT (key) DO NOTHING`, k.key, k.hash)
	if err != nil {
		return answer{}, false, fmt.Errorf("claim idempotency key: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return answer{}, true, nil
	}
	// Read committed: this statement sees the row that made ours conflict.
	var (
		hash   string
		status int
		body   []byte
	)
	err = tx.QueryRow(ctx,
		`SELECT request_hash, status_code, response_body FROM api_idempotency WHERE key = $1`, k.key).
		Scan(&hash, &status, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return answer{}, false, errKeyVanished
	}
	if err != nil {
		return answer{}, false, fmt.Errorf("read idempotency key: %w", err)
	}
	if hash != k.hash {
		return answer{}, false, errKeyReused
	}
	a := answer{status: status, replayed: true}
	if err := json.Unmarshal(body, &a.body); err != nil {
		return answer{}, false, fmt.Errorf("decode stored answer: %w", err)
	}
	return a, false, nil
}

func storeAnswer(ctx context.Context, tx pgx.Tx, key string, a answer) error {
	body, err := json.Marshal(a.body)
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	_, err = tx.Exec(ctx,
		`UPDATE api_idempotency SET status_code = $2, response_body = $3 WHERE key = $1`,
		key, a.status, json.RawMessage(body))
	if err != nil {
		return fmt.Errorf("store answer: %w", err)
	}
	return nil
}
