package api

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestIdempotencyTTL: keys older than the TTL are pruned (in batches, every
// one of them) and no longer answered from, even before the pruner ran; a
// retry within the TTL still gets the stored answer.
func TestIdempotencyTTL(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, func(_ *pgStore, c *Config) { c.IdempotencyTTL = time.Hour })
	ctx := context.Background()
	body := orderBody("", "Ada", 700, "EUR")
	fresh := a.post(t, body, HeaderIdempotencyKey, "fresh")
	stale := a.post(t, body, HeaderIdempotencyKey, "stale")
	if fresh.status != http.StatusCreated || stale.status != http.StatusCreated {
		t.Fatalf("first answers: %d, %d", fresh.status, stale.status)
	}
	// "stale" and a backlog of more than one batch of keys age past the TTL.
	old := pruneBatch*2 + 17
	if _, err := a.pool.Exec(ctx, `UPDATE api_idempotency SET created_at = now() - interval '2 hours' WHERE key = 'stale'`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(ctx, `INSERT INTO api_idempotency (key, request_hash, status_code, response_body, created_at)
		SELECT 'old-' || g, 'h', 201, '{}', now() - interval '25 hours' FROM generate_series(1, $1) g`, old); err != nil {
		t.Fatal(err)
	}

	// Expired but not pruned yet: the key is a new request, not a replay.
	again := a.post(t, body, HeaderIdempotencyKey, "stale")
	if again.status != http.StatusCreated || again.header.Get("Idempotent-Replayed") != "" || bytes.Equal(again.body, stale.body) {
		t.Fatalf("expired key: %d %s (replayed %q), want a new order", again.status, again.body, again.header.Get("Idempotent-Replayed"))
	}
	// Within the TTL: the stored answer.
	if r := a.post(t, body, HeaderIdempotencyKey, "fresh"); r.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.body, fresh.body) {
		t.Fatalf("key within the TTL: %d %s, want the first answer", r.status, r.body)
	}

	n, err := a.store.prune(ctx, time.Hour)
	if err != nil || n != int64(old) {
		t.Fatalf("prune = %d, %v; want %d", n, err, old)
	}
	var left []string
	rows, err := a.pool.Query(ctx, `SELECT key FROM api_idempotency ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		left = append(left, k)
	}
	if got := strings.Join(left, ","); got != "fresh,stale" { // stale was claimed anew
		t.Fatalf("keys left %s, want fresh,stale", got)
	}
	if r := a.post(t, body, HeaderIdempotencyKey, "fresh"); r.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.body, fresh.body) {
		t.Fatalf("after pruning, key within the TTL: %d %s, want the first answer", r.status, r.body)
	}
}

func TestIdempotencyTTLIsValidated(t *testing.T) {
	c := DefaultConfig()
	if c.IdempotencyTTL != 24*time.Hour {
		t.Fatalf("default TTL %s, want 24h", c.IdempotencyTTL)
	}
	c.IdempotencyTTL = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Config.IdempotencyTTL") {
		t.Fatalf("Validate = %v", err)
	}
	for ttl, want := range map[time.Duration]time.Duration{time.Second: time.Second, time.Hour: 5 * time.Minute, 24 * time.Hour: 5 * time.Minute} {
		if got := pruneInterval(ttl); got != want {
			t.Errorf("pruneInterval(%s) = %s, want %s", ttl, got, want)
		}
	}
}
