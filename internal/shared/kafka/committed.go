package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/backoff"
)

// fetchBytes bounds one fetch of ReadCommitted.
const fetchBytes = 4 << 20

// ReadFunc reads one partition, visiting its records: ReadCommitted or
// ReadStable.
type ReadFunc func(ctx context.Context, client sarama.Client, topic string, partition int32, visit func(offset int64, r *sarama.Record) error) error

// ReadCommitted visits the records of one partition, oldest first, up to
// its high watermark when the read began, as a read_committed consumer sees
// them: records of aborted transactions and control records left out. It
// waits while a transaction below that watermark is still open.
func ReadCommitted(ctx context.Context, client sarama.Client, topic string, partition int32, visit func(offset int64, r *sarama.Record) error) error {
	return readCommitted(ctx, client, topic, partition, true, visit)
}

// ReadStable is ReadCommitted up to the partition's last stable offset when
// the read began, instead of its high watermark: what is committed now,
// without waiting for a transaction still open (one a crashed producer left
// is decided only when its transactional id is taken over or its timeout
// passes). The records of a transaction whose commit the coordinator took
// but whose markers are not yet written are left out too.
func ReadStable(ctx context.Context, client sarama.Client, topic string, partition int32, visit func(offset int64, r *sarama.Record) error) error {
	return readCommitted(ctx, client, topic, partition, false, visit)
}

// readCommitted is ReadCommitted, or ReadStable when waitOpen is false.
func readCommitted(ctx context.Context, client sarama.Client, topic string, partition int32, waitOpen bool, visit func(offset int64, r *sarama.Record) error) error {
	offset, err := client.GetOffset(topic, partition, sarama.OffsetOldest)
	if err != nil {
		return fmt.Errorf("read %s/%d: %w", topic, partition, err)
	}
	target := int64(-1) // the high watermark (or last stable offset) when the read began
	for ctx.Err() == nil {
		block, err := fetchFromLeader(ctx, client, topic, partition, offset)
		if err != nil {
			return err
		}
		if target < 0 {
			target = block.HighWaterMarkOffset
			if !waitOpen && block.LastStableOffset >= 0 {
				target = block.LastStableOffset
			}
		}
		if offset >= target {
			return nil
		}
		end := block.LastStableOffset
		if end < 0 {
			end = block.HighWaterMarkOffset
		}
		if offset >= end {
			// Another producer's transaction is still open below the
			// target: wait until it is decided.
			if !backoff.Sleep(ctx, 50*time.Millisecond) {
				break
			}
			continue
		}
		next, err := scanCommitted(block, offset, min(end, target), visit)
		if err != nil {
			return fmt.Errorf("read %s/%d at offset %d: %w", topic, partition, offset, err)
		}
		if next <= offset {
			return fmt.Errorf("read %s/%d: no progress at offset %d", topic, partition, offset)
		}
		offset = next
	}
	return context.Cause(ctx)
}

// maxLeaderRetries bounds the fetches a read retries in a row after a
// leadership answer: about 5.5 s of waits between them.
const maxLeaderRetries = 10

// leaderMoved reports an answer that means the reader asked the wrong
// broker, or asked too early: the partition's leader moved or is being
// elected, or a topic just created is not known everywhere yet.
func leaderMoved(err error) bool {
	return errors.Is(err, sarama.ErrNotLeaderForPartition) || errors.Is(err, sarama.ErrLeaderNotAvailable) ||
		errors.Is(err, sarama.ErrUnknownTopicOrPartition) || errors.Is(err, sarama.ErrReplicaNotAvailable)
}

// fetchFromLeader is fetchBlock, asked again after a metadata refresh
// while the answer is a leadership one (a topic just created, a leader that
// moved), up to maxLeaderRetries times.
func fetchFromLeader(ctx context.Context, client sarama.Client, topic string, partition int32, offset int64) (*sarama.FetchResponseBlock, error) {
	for moved := 1; ; moved++ {
		block, err := fetchBlock(client, topic, partition, offset)
		if err == nil || !leaderMoved(err) || moved > maxLeaderRetries {
			return block, err
		}
		_ = client.RefreshMetadata(topic)
		if !backoff.Sleep(ctx, time.Duration(moved)*100*time.Millisecond) {
			return nil, context.Cause(ctx)
		}
	}
}

func fetchBlock(client sarama.Client, topic string, partition int32, offset int64) (*sarama.FetchResponseBlock, error) {
	b, err := client.Leader(topic, partition)
	if err != nil {
		return nil, fmt.Errorf("find leader of %s/%d: %w", topic, partition, err)
	}
	req := &sarama.FetchRequest{Version: 11, MaxBytes: fetchBytes, Isolation: sarama.ReadCommitted}
	req.AddBlock(topic, partition, offset, fetchBytes, -1)
	resp, err := b.Fetch(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s/%d: %w", topic, partition, err)
	}
	block := resp.GetBlock(topic, partition)
	if block == nil {
		return nil, fmt.Errorf("fetch %s/%d: no answer for the partition", topic, partition)
	}
	if !errors.Is(block.Err, sarama.ErrNoError) {
		return nil, fmt.Errorf("fetch %s/%d: %w", topic, partition, block.Err)
	}
	return block, nil
}

// scanCommitted visits the committed records of block from offset, below
// end, and returns the offset to fetch next. A batch of a producer with an
// aborted transaction open at that offset is skipped, up to that producer's
// next control record, as the Java consumer does.
func scanCommitted(block *sarama.FetchResponseBlock, offset, end int64, visit func(offset int64, r *sarama.Record) error) (int64, error) {
	aborted := slices.Clone(block.AbortedTransactions)
	slices.SortFunc(aborted, func(a, b *sarama.AbortedTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	open := map[int64]bool{} // producers inside an aborted transaction
	next := offset
	for _, recs := range block.RecordsSet {
		rb := recs.RecordBatch
		if rb == nil || rb.PartialTrailingRecord || rb.FirstOffset >= end {
			break
		}
		last := rb.FirstOffset + int64(rb.LastOffsetDelta)
		for len(aborted) > 0 && aborted[0].FirstOffset <= last {
			open[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		next = max(next, last+1)
		if rb.Control {
			delete(open, rb.ProducerID) // the end of that producer's transaction
			continue
		}
		if rb.IsTransactional && open[rb.ProducerID] {
			continue
		}
		for _, r := range rb.Records {
			if rb.FirstOffset+r.OffsetDelta < offset {
				continue
			}
			if err := visit(rb.FirstOffset+r.OffsetDelta, r); err != nil {
				return next, err
			}
		}
	}
	return next, nil
}
