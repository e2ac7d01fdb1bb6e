package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventforge/eventforge/cdc/pgoutput"
	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// checkMapping checks the outbox mapping against the catalog. A mismatch (a
// missing table or column, an unsupported type) is fatal: retrying cannot
// fix it.
func checkMapping(ctx context.Context, q outbox.Querier, m outbox.Mapping) (*outbox.Catalog, error) {
	cat, err := m.Check(ctx, q)
	if errors.Is(err, outbox.ErrMapping) {
		return nil, fatal(err)
	}
	if err != nil {
		return nil, fmt.Errorf("check outbox mapping: %w", err)
	}
	return cat, nil
}

// mappingDefaults fills an unset Mapping from the contract's, on OutboxTable,
// and keeps OutboxTable equal to Mapping.Table (which wins when both are set).
func (c *Config) mappingDefaults() {
	m := &c.Mapping
	if m.EventID == "" && m.Topic == "" && m.Key == "" && m.Payload == "" {
		table := m.Table
		*m = outbox.DefaultMapping()
		m.Table = table
	}
	if m.Table == "" {
		m.Table = c.OutboxTable
	}
	if m.Format == "" {
		m.Format = outbox.FormatEventForge
	}
	if m.CloudEventsSource == "" {
		m.CloudEventsSource = outbox.DefaultCloudEventsSource
	}
	if m.NullPayload == "" {
		m.NullPayload = outbox.NullPayloadReject
	}
	m.Normalize()
	c.OutboxTable = m.Table
}

// decoder is a decoder of the mapped table. Config.Validate has checked the
// table and extra header names, the only things NewMappedDecoder can reject.
func (r *Relay) decoder() *pgoutput.Decoder {
	dec, err := pgoutput.NewMappedDecoder(&r.cfg.Mapping)
	if err != nil {
		schema, table, _ := r.cfg.outboxTable()
		return pgoutput.NewDecoder(schema, table)
	}
	return dec
}
