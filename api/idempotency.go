package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// idempotencyKey is an Idempotency-Key header with the hash of the validated
// request it came with.
type idempotencyKey struct{ key, hash string }

// claimKey inserts the key's row, or takes over the row of an expired key
// (older than ttl: its answer is no longer kept, even before the pruner
// removed it). When the key exists already it returns the stored answer
// (claimed false), or errKeyReused if the request differs.
func claimKey(ctx context.Context, tx pgx.Tx, k idempotencyKey, ttl time.Duration) (answer, bool, error) {
	tag, err := tx.Exec(ctx,
		`INSERT INTO api_idempotency (key, request_hash, status_code, response_body)
		 VALUES ($1, $2, 0, '{}')
		 ON CONFLICT (key) DO UPDATE SET request_hash = EXCLUDED.request_hash, status_code = 0,
		   response_body = '{}', created_at = now()
		 WHERE api_idempotency.created_at < now() - make_interval(secs => $3)`, k.key, k.hash, ttl.Seconds())
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

// pruneBatch is how many expired keys one DELETE removes: small, so pruning
// never holds many row locks or competes long with requests.
const pruneBatch = 500

// prune deletes the keys older than ttl, pruneBatch rows per statement,
// until none is left or ctx ends. It returns how many it removed.
func (s *pgStore) prune(ctx context.Context, ttl time.Duration) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx,
			`DELETE FROM api_idempotency WHERE key IN (
			   SELECT key FROM api_idempotency WHERE created_at < now() - make_interval(secs => $1)
			   LIMIT $2 FOR UPDATE SKIP LOCKED)`, ttl.Seconds(), pruneBatch)
		if err != nil {
			return total, fmt.Errorf("prune expired idempotency keys: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch {
			return total, nil
		}
	}
}

// pruneInterval is how often the pruner runs for a TTL: a tenth of it,
// between a second and five minutes.
func pruneInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/10, time.Second), 5*time.Minute)
}

// pruneLoop prunes expired keys every pruneInterval of the TTL until ctx
// ends. A role without DELETE gets one warning and no more attempts: expired
// keys are then still never answered from (claimKey), only kept.
func (s *Server) pruneLoop(ctx context.Context) {
	ttl, log := s.cfg.IdempotencyTTL, s.log
	t := time.NewTicker(pruneInterval(ttl))
	defer t.Stop()
	for {
		n, err := s.store.prune(ctx, ttl)
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && pe.Code == "42501":
			log.Warn("the API's role lacks DELETE on api_idempotency: expired Idempotency-Keys are not pruned; see SECURITY.md#roles")
			return
		case err != nil && ctx.Err() == nil:
			log.Warn("pruning expired Idempotency-Keys failed; retrying later", "err", err)
		case n > 0:
			log.Debug("pruned expired Idempotency-Keys", "rows", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
