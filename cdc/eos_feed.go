package cdc

import (
	"context"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/cdc/eos"
	"github.com/eventforge/eventforge/cdc/position"
	"github.com/eventforge/eventforge/internal/shared/failpoint"
)

// eosFeeder is the exactly-once Kafka side of a session: package eos's
// feeder, which cuts the stream's events into Kafka transactions for the
// session's engine (docs/design.md#exactly-once).
type eosFeeder struct{ *eos.Feeder[*pending] }

// newEOSFeeder ensures the position topic and reads the position from it.
// ps's transactional producer has initialised already, so an earlier
// producer of the slot is fenced and its open transaction aborted: the read
// sees every transaction that will ever commit under this id.
func newEOSFeeder(ctx context.Context, ps *producerSession) (*eosFeeder, error) {
	topic := ps.cfg.positionTopic()
	if err := ps.topics.EnsureCompacted(ctx, topic); err != nil {
		return nil, err
	}
	pos, err := position.Read(ctx, ps.client, topic, ps.cfg.Slot)
	if err != nil {
		return nil, err
	}
	cfg := eos.Config{Topic: topic, Slot: ps.cfg.Slot, Interval: ps.cfg.TxnInterval,
		MaxHeld: ps.cfg.MaxInFlightEvents / 2, MaxBytes: ps.cfg.MaxInFlightBytes / 2, Done: pos, Log: ps.log}
	return &eosFeeder{eos.New(cfg, ps.eng, eosItems{ps})}, nil
}

// feed runs the feeder and the engine until in closes or ctx ends.
func (f *eosFeeder) feed(ctx context.Context, in <-chan *pending) error { return f.Feed(ctx, in) }

// eosItems is what the feeder reads of the relay's events (eos.Items).
type eosItems struct{ ps *producerSession }

// Of reads p: a transaction-end marker has no record.
func (eosItems) Of(p *pending) eos.Event {
	return eos.Event{Marker: p.msg == nil, Txn: p.txn, LSN: p.lsn, End: p.end, Size: p.size}
}

// Position wraps the position record that ends a Kafka transaction.
func (eosItems) Position(msg *sarama.ProducerMessage) *pending {
	marker := &pending{ends: true, msg: msg}
	msg.Metadata = marker
	marker.size = msg.ByteSize(recordVersion)
	return marker
}

// Skip acks an event a committed Kafka transaction holds already.
func (x eosItems) Skip(p *pending) {
	x.ps.m.eosSkipped.Inc()
	x.ps.tr.Ack(p.tok)
}

// committing is the engine's call just before a Kafka transaction commits.
func (ps *producerSession) committing() { failpoint.Hit(failpoint.CDCEOSBeforeKafkaCommit) }

// committed hears of a Kafka transaction's commit, before its events are
// acked.
func (ps *producerSession) committed(records int, err error) {
	if err != nil {
		ps.m.kafkaTxns.WithLabelValues("failed").Inc()
		ps.log.Warn("Kafka transaction not committed: it is aborted, its events are sent again by the next session",
			"records", records, "err", err)
		return
	}
	ps.m.kafkaTxns.WithLabelValues("committed").Inc()
	failpoint.Hit(failpoint.CDCEOSAfterKafkaCommit)
	if ps.eos != nil {
		ps.eos.Committed()
	}
}

// positionTopicSuffix names the exactly-once relay's position topic after
// the topic prefix, unless --position-topic names it.
const positionTopicSuffix = "eventforge.positions"

// positionTopic is the compacted topic holding the exactly-once position of
// each slot (key: the slot name).
func (c *Config) positionTopic() string {
	if c.PositionTopic != "" {
		return c.PositionTopic
	}
	return c.TopicPrefix + positionTopicSuffix
}
