package position

import (
	"context"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

// Read reads slot's latest committed position from the single partition
// of topic (the compacted position topic, keyed by slot name), up to its
// high watermark. The caller's transactional producer has fenced every
// earlier one of the slot, so every transaction of the slot below that
// watermark is decided. The zero Position: none recorded.
func Read(ctx context.Context, client sarama.Client, topic, slot string) (Position, error) {
	return read(ctx, kafka.ReadCommitted, client, topic, slot)
}

// ReadNow is Read for a reader that fenced nothing: the position committed
// now, up to the partition's last stable offset, without waiting for a
// transaction a producer of the slot still has open (or left open when it
// died, which stays open until the slot's next producer fences it).
func ReadNow(ctx context.Context, client sarama.Client, topic, slot string) (Position, error) {
	return read(ctx, kafka.ReadStable, client, topic, slot)
}

func read(ctx context.Context, readPartition kafka.ReadFunc, client sarama.Client, topic, slot string) (Position, error) {
	var pos Position
	err := readPartition(ctx, client, topic, 0, func(_ int64, r *sarama.Record) error {
		if string(r.Key) != slot || r.Value == nil {
			return nil
		}
		s, p, err := Decode(r.Value)
		if err != nil {
			return err
		}
		if s == slot {
			pos = Max(pos, p)
		}
		return nil
	})
	return pos, err
}
