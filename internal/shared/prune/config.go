// Package prune deletes outbox rows the relay has already published, in
// small batches of short transactions, after checking that nothing it would
// delete can still be needed by a relay: see Run for the guard.
//
// Imports (floor: shared library): internal/shared/outbox and internal/shared/slots only.
package prune

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Defaults of Config, also the defaults of `outbox prune`'s flags.
const (
	DefaultBatchSize   = 1000
	MaxBatchSize       = 100000
	DefaultRelayWait   = time.Minute
	DefaultOutboxTable = "public.outbox"
	defaultPoll        = 200 * time.Millisecond
)

// Config says what to prune and how.
type Config struct {
	// OlderThan: rows whose created_at is before now() - OlderThan are pruned.
	OlderThan time.Duration
	// BatchSize is the most rows one DELETE (one transaction) removes.
	BatchSize int
	// DryRun checks the guard and counts the rows, deleting none.
	DryRun bool
	// RelayWait bounds the wait for every relay slot to confirm the WAL
	// position taken at the start (the relay's heartbeat moves it within
	// seconds when the relay runs).
	RelayWait time.Duration
	// OutboxTable is schema.table of the outbox.
	OutboxTable string
	// Mapping names the outbox's event id and created-at columns (and its
	// table, which wins over OutboxTable when set); zero: the contract's.
	Mapping outbox.Mapping
	// Poll is the interval of slot readings while waiting.
	Poll time.Duration
}

// withDefaults fills zero values.
func (c Config) withDefaults() Config {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.RelayWait == 0 {
		c.RelayWait = DefaultRelayWait
	}
	if c.OutboxTable == "" {
		c.OutboxTable = DefaultOutboxTable
	}
	if c.Poll == 0 {
		c.Poll = defaultPoll
	}
	return c
}

// Validate reports the first invalid setting (after defaults are applied).
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.OlderThan <= 0:
		return errors.New("--older-than must be a positive duration, e.g. 168h")
	case c.BatchSize < 1 || c.BatchSize > MaxBatchSize:
		return fmt.Errorf("--batch-size %d out of range 1..%d", c.BatchSize, MaxBatchSize)
	case c.RelayWait < 0:
		return errors.New("--relay-wait must not be negative")
	}
	if _, err := tableIdent(c.OutboxTable); err != nil {
		return err
	}
	return c.mapping().Validate()
}

// tableIdent parses "table" or "schema.table" into a quoted identifier.
func tableIdent(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("invalid outbox table %q: want table or schema.table", name)
	}
	for _, p := range parts {
		if p == "" {
			return "", fmt.Errorf("invalid outbox table %q: want table or schema.table", name)
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}

// mapping is the outbox mapping pruned: Mapping, or the contract's on
// OutboxTable.
func (c Config) mapping() outbox.Mapping {
	m := c.Mapping
	if m.EventID == "" && m.Topic == "" && m.Key == "" && m.Payload == "" {
		table := m.Table
		m = outbox.DefaultMapping()
		m.Table = table
	}
	if m.Table == "" {
		m.Table = c.OutboxTable
	}
	return m
}
