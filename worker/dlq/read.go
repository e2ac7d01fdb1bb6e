package dlq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/IBM/sarama"
)

// DefaultIdleTimeout bounds the wait for the next record while reading a
// partition up to its high watermark.
const DefaultIdleTimeout = 30 * time.Second

// ErrNoTopic is returned for a dead-letter topic that does not exist.
var ErrNoTopic = errors.New("topic does not exist")

// ReadAll reads every record of topic, from the oldest offset of each
// partition to the high watermark it had when ReadAll started, with a plain
// consumer (no group, nothing committed). Letters come ordered by partition,
// then offset.
func ReadAll(ctx context.Context, client sarama.Client, topic string) ([]Letter, error) {
	if err := client.RefreshMetadata(topic); err != nil {
		if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return nil, fmt.Errorf("read %s: %w", topic, ErrNoTopic)
		}
		return nil, fmt.Errorf("read metadata of %s: %w", topic, err)
	}
	parts, err := client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", topic, err)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, fmt.Errorf("create consumer: %w", err)
	}
	defer consumer.Close()
	var out []Letter
	for _, p := range parts {
		ls, err := readPartition(ctx, client, consumer, topic, p)
		if err != nil {
			return nil, err
		}
		out = append(out, ls...)
	}
	return out, nil
}

func readPartition(ctx context.Context, client sarama.Client, consumer sarama.Consumer, topic string, p int32) ([]Letter, error) {
	oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest)
	if err != nil {
		return nil, fmt.Errorf("read oldest offset of %s/%d: %w", topic, p, err)
	}
	hwm, err := client.GetOffset(topic, p, sarama.OffsetNewest)
	if err != nil {
		return nil, fmt.Errorf("read high watermark of %s/%d: %w", topic, p, err)
	}
	if hwm <= oldest {
		return nil, nil
	}
	pc, err := consumer.ConsumePartition(topic, p, oldest)
	if err != nil {
		return nil, fmt.Errorf("consume %s/%d: %w", topic, p, err)
	}
	defer pc.AsyncClose()
	idle := time.NewTimer(DefaultIdleTimeout)
	defer idle.Stop()
	var out []Letter
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-idle.C:
			return nil, fmt.Errorf("read %s/%d: no record for %s before offset %d", topic, p, DefaultIdleTimeout, hwm)
		case cerr := <-pc.Errors():
			if cerr != nil {
				return nil, fmt.Errorf("read %s/%d: %w", topic, p, cerr.Err)
			}
		case m := <-pc.Messages():
			out = append(out, Decode(m))
			// Offsets may skip (control records), so stop at the first
			// record at or past the last one.
			if m.Offset+1 >= hwm {
				return out, nil
			}
			idle.Reset(DefaultIdleTimeout)
		}
	}
}
