package produce

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// ErrFenced marks the end of a transactional engine whose transactional id
// a newer producer took over: nothing it sends will be accepted again.
var ErrFenced = errors.New("fenced: another producer took over the transactional id")

// txn is the state of a transactional engine (Config.TransactionalID):
// records go out inside Kafka transactions, each ended by a Commit record.
// A record the broker appended is held, not delivered, until the
// transaction that holds it committed.
type txn struct {
	id     string
	added  map[partKey]bool // partitions of the open transaction
	ends   map[partKey]bool // partitions of earlier Commit records: added with the first ones of a transaction
	held   []*Record        // appended in the open transaction, in settle order
	ending bool             // a Commit record was admitted: commit once every record is settled
}

// txnVersions are the request versions of the transaction protocol for a
// Kafka version: InitProducerID, and AddPartitionsToTxn with EndTxn.
func txnVersions(v sarama.KafkaVersion) (initPID, txnReq int16) {
	switch {
	case v.IsAtLeast(sarama.V2_8_0_0):
		return 4, 3
	case v.IsAtLeast(sarama.V2_7_0_0):
		return 4, 2
	case v.IsAtLeast(sarama.V2_5_0_0):
		return 3, 1
	case v.IsAtLeast(sarama.V2_4_0_0):
		return 2, 1
	case v.IsAtLeast(sarama.V2_0_0_0):
		return 1, 1
	}
	return 0, 0
}

// fencedError reports err, the coordinator's or a partition's answer, as
// ErrFenced when it says a newer producer of the id exists.
func fencedError(what string, err error) error {
	if errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch) {
		return fmt.Errorf("%s: %w: %w", what, ErrFenced, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// retriableTxn reports a coordinator's answer that may pass: the
// coordinator moving or loading, or the previous transaction's markers
// still being written.
func retriableTxn(err sarama.KError) (retry, refresh bool) {
	switch err {
	case sarama.ErrNotCoordinatorForConsumer, sarama.ErrConsumerCoordinatorNotAvailable:
		return true, true
	case sarama.ErrConcurrentTransactions, sarama.ErrOffsetsLoadInProgress, sarama.ErrRequestTimedOut,
		sarama.ErrNotEnoughReplicas, sarama.ErrNotEnoughReplicasAfterAppend,
		sarama.ErrUnknownTopicOrPartition, // a topic just created, not yet known to the coordinator
		sarama.ErrOperationNotAttempted:   // another partition of the request failed
		return true, false
	}
	return false, false
}

// coordinate sends a request to the transaction coordinator of id until
// it is answered without a retriable error, at most 1+cfg.TxnRetries
// times. do returns the answer's error code and a transport error.
func coordinate(ctx context.Context, cluster Cluster, cfg *Config, what string, do func(*sarama.Broker) (sarama.KError, error)) error {
	var last error
	for n := 0; ; n++ {
		if n > 0 {
			if n > cfg.TxnRetries {
				return fencedError(what, fmt.Errorf("%w (%d attempts)", last, n))
			}
			if err := sleep(ctx, cfg.TxnBackoff(n-1)); err != nil {
				return err
			}
		}
		b, err := cluster.TransactionCoordinator(cfg.TransactionalID)
		if err != nil {
			last = err
			continue
		}
		kerr, err := do(b)
		if err != nil {
			_ = b.Close()
			_ = cluster.RefreshTransactionCoordinator(cfg.TransactionalID)
			last = err
			continue
		}
		if errors.Is(kerr, sarama.ErrNoError) {
			return nil
		}
		retry, refresh := retriableTxn(kerr)
		if !retry {
			return fencedError(what, kerr)
		}
		if refresh {
			_ = cluster.RefreshTransactionCoordinator(cfg.TransactionalID)
		}
		last = kerr
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// initProducerID asks the cluster for a producer id: an idempotent one, or
// with a transactional id the id's, with its epoch bumped. The coordinator
// then fences every earlier producer of the id and aborts its open
// transaction.
func initProducerID(ctx context.Context, cluster Cluster, cfg *Config) (int64, int16, error) {
	if cfg.TransactionalID == "" {
		resp, err := cluster.InitProducerID()
		if err == nil && !errors.Is(resp.Err, sarama.ErrNoError) {
			err = resp.Err
		}
		if err != nil {
			return 0, 0, fmt.Errorf("init producer id: %w", err)
		}
		return resp.ProducerID, resp.ProducerEpoch, nil
	}
	version, _ := txnVersions(cfg.Version)
	id := cfg.TransactionalID
	req := &sarama.InitProducerIDRequest{Version: version, TransactionalID: &id,
		TransactionTimeout: cfg.TransactionTimeout, ProducerID: -1, ProducerEpoch: -1}
	var resp *sarama.InitProducerIDResponse
	err := coordinate(ctx, cluster, cfg, "init the transactional producer "+id, func(b *sarama.Broker) (sarama.KError, error) {
		var err error
		if resp, err = b.InitProducerID(req); err != nil {
			return 0, err
		}
		return resp.Err, nil
	})
	if err != nil {
		return 0, 0, err
	}
	return resp.ProducerID, resp.ProducerEpoch, nil
}

// addPartitions adds the partitions of gens that the open transaction does
// not hold yet, in one request.
func (e *Engine[T]) addPartitions(ctx context.Context, gens []*generation) error {
	want := map[string][]int32{}
	n := 0
	for _, g := range gens {
		if k := g.part.partKey; !e.txn.added[k] {
			want[k.topic] = append(want[k.topic], k.partition)
			e.txn.added[k] = true // marked now, so a partition is asked for once
			n++
		}
	}
	if n == 0 {
		return nil
	}
	for k := range e.txn.ends { // the Commit record's partition, a round trip saved
		if !e.txn.added[k] {
			want[k.topic] = append(want[k.topic], k.partition)
			e.txn.added[k] = true
		}
	}
	_, version := txnVersions(e.cfg.Version)
	req := &sarama.AddPartitionsToTxnRequest{Version: version, TransactionalID: e.txn.id,
		ProducerID: e.pid, ProducerEpoch: e.epoch, TopicPartitions: want}
	return coordinate(ctx, e.cluster, &e.cfg, "add partitions to the Kafka transaction", func(b *sarama.Broker) (sarama.KError, error) {
		resp, err := b.AddPartitionsToTxn(req)
		if err != nil {
			return 0, err
		}
		return worstPartitionError(resp), nil
	})
}

// worstPartitionError is the error of an AddPartitionsToTxn response: the
// first one no retry passes, else the first retriable one, else none.
func worstPartitionError(resp *sarama.AddPartitionsToTxnResponse) sarama.KError {
	worst := sarama.ErrNoError
	for _, results := range resp.Errors {
		for _, pe := range results {
			if errors.Is(pe.Err, sarama.ErrNoError) {
				continue
			}
			if retry, _ := retriableTxn(pe.Err); !retry {
				return pe.Err
			}
			if errors.Is(worst, sarama.ErrNoError) || errors.Is(worst, sarama.ErrOperationNotAttempted) {
				worst = pe.Err
			}
		}
	}
	return worst
}

// commitTxn commits the open transaction.
func (e *Engine[T]) commitTxn(ctx context.Context) error { return e.endTxn(ctx, true) }

// endTxn commits, or aborts, the open transaction.
func (e *Engine[T]) endTxn(ctx context.Context, commit bool) error {
	_, version := txnVersions(e.cfg.Version)
	req := &sarama.EndTxnRequest{Version: version, TransactionalID: e.txn.id,
		ProducerID: e.pid, ProducerEpoch: e.epoch, TransactionResult: commit}
	what := "commit the Kafka transaction"
	if !commit {
		what = "abort the Kafka transaction"
	}
	return coordinate(ctx, e.cluster, &e.cfg, what, func(b *sarama.Broker) (sarama.KError, error) {
		resp, err := b.EndTxn(req)
		if err != nil {
			return 0, err
		}
		return resp.Err, nil
	})
}

// Abort aborts the transaction Run left open, so read_committed readers of
// its partitions need not wait for the id's next producer or the
// transaction timeout. It is for after Run returned and must not race a
// request: it waits at most wait for the senders to end, and leaves the
// transaction open (to be aborted by the id's next producer) when they do
// not. It does nothing for an engine without a transaction open.
func (e *Engine[T]) Abort(ctx context.Context, wait time.Duration) error {
	if e.txn == nil || len(e.txn.added) == 0 {
		return nil
	}
	idle := make(chan struct{})
	go func() { e.Wait(); close(idle) }()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
		return fmt.Errorf("abort the Kafka transaction: a produce request still out after %v", wait)
	}
	if err := e.endTxn(ctx, false); err != nil {
		return err
	}
	clear(e.txn.added)
	return nil
}

// committing reports a transaction waiting for its records to settle
// before it commits: Run takes no record meanwhile.
func (e *Engine[T]) committing() bool { return e.txn != nil && e.txn.ending }

// commitIfSettled commits the open transaction once its Commit record was
// admitted and every record is settled, then delivers the records it
// holds, in order. Hooks.Committed hears of the outcome first.
func (e *Engine[T]) commitIfSettled(ctx context.Context) error {
	if !e.committing() || e.open > 0 {
		return nil
	}
	if e.hooks.Committing != nil {
		e.hooks.Committing()
	}
	err := e.commitTxn(ctx)
	if e.hooks.Committed != nil {
		e.hooks.Committed(len(e.txn.held), err)
	}
	if err != nil {
		return err
	}
	held := e.txn.held
	e.txn.held, e.txn.ending = nil, false
	clear(e.txn.added)
	for _, r := range held {
		e.hooks.Delivered(r)
	}
	return nil
}
