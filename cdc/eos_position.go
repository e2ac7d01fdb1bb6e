package cdc

import (
	"context"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/cdc/position"
	"github.com/eventforge/eventforge/internal/shared/kafka"
)

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

// readPosition reads slot's latest committed position from the single
// partition of topic, up to its high watermark: this relay's producer has
// fenced any earlier one of the slot, so every transaction of the slot
// below it is decided. The zero Position: none recorded.
func readPosition(ctx context.Context, client sarama.Client, topic, slot string) (position.Position, error) {
	var pos position.Position
	err := kafka.ReadCommitted(ctx, client, topic, 0, func(_ int64, r *sarama.Record) error {
		if string(r.Key) != slot || r.Value == nil {
			return nil
		}
		s, p, err := position.Decode(r.Value)
		if err != nil {
			return err
		}
		if s == slot {
			pos = position.Max(pos, p)
		}
		return nil
	})
	return pos, err
}
