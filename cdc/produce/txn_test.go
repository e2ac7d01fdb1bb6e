package produce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

const txnID = "eventforge-slot"

// txnCluster is a one-broker MockBroker leading every partition of topic
// and coordinating txnID's transactions; its AddPartitionsToTxn, produce
// and EndTxn requests get the responses of adds, produces and ends in
// turn (the last one repeats; none given: success).
func txnCluster(t *testing.T, partitions int32, adds, produces, ends []any) *sarama.MockBroker {
	t.Helper()
	b := sarama.NewMockBroker(t, 1)
	t.Cleanup(b.Close)
	md := sarama.NewMockMetadataResponse(t).SetBroker(b.Addr(), b.BrokerID()).SetController(b.BrokerID())
	for p := range partitions {
		md.SetLeader(topic, p, b.BrokerID())
	}
	if len(adds) == 0 {
		adds = []any{added()}
	}
	if len(ends) == 0 {
		ends = []any{ended(sarama.ErrNoError)}
	}
	b.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest":           md,
		"FindCoordinatorRequest":    sarama.NewMockFindCoordinatorResponse(t).SetCoordinator(sarama.CoordinatorTransaction, txnID, b),
		"InitProducerIDRequest":     sarama.NewMockInitProducerIDResponse(t).SetProducerID(7).SetProducerEpoch(3),
		"AddPartitionsToTxnRequest": sarama.NewMockSequence(adds...),
		"ProduceRequest":            sarama.NewMockSequence(produces...),
		"EndTxnRequest":             sarama.NewMockSequence(ends...),
	})
	return b
}

// added answers an AddPartitionsToTxn request: err for partition 0 if
// given, else success.
func added(err ...sarama.KError) *sarama.AddPartitionsToTxnResponse {
	r := &sarama.AddPartitionsToTxnResponse{Errors: map[string][]*sarama.PartitionError{}}
	for _, e := range err {
		r.Errors[topic] = append(r.Errors[topic], &sarama.PartitionError{Partition: 0, Err: e})
	}
	return r
}

func ended(err sarama.KError) *sarama.EndTxnResponse { return &sarama.EndTxnResponse{Err: err} }

// txnLog is the transaction protocol b saw, request by request.
func txnLog(b *sarama.MockBroker) []string {
	var out []string
	for _, rr := range b.History() {
		switch req := rr.Request.(type) {
		case *sarama.InitProducerIDRequest:
			if req.TransactionalID == nil {
				out = append(out, "init without id")
			} else {
				out = append(out, "init "+*req.TransactionalID)
			}
		case *sarama.AddPartitionsToTxnRequest:
			var ps []string
			for tp, parts := range req.TopicPartitions {
				for _, p := range parts {
					ps = append(ps, fmt.Sprintf("%s/%d", tp, p))
				}
			}
			sort.Strings(ps)
			out = append(out, fmt.Sprintf("add %s pid %d/%d", strings.Join(ps, ","), req.ProducerID, req.ProducerEpoch))
		case *sarama.ProduceRequest:
			id := "none"
			if req.TransactionalID != nil {
				id = *req.TransactionalID
			}
			out = append(out, fmt.Sprintf("produce[%s] %s", id, batches(req)))
		case *sarama.EndTxnRequest:
			out = append(out, fmt.Sprintf("end commit=%v", req.TransactionResult))
		}
	}
	return out
}

// txnRun hands txns to a transactional engine against b, one transaction
// after the previous one committed, each ended by a Commit record ("pos"),
// and returns what the hooks saw, in order.
func txnRun(t *testing.T, b *sarama.MockBroker, keys map[string]string, txns ...[]string) ([]string, error) {
	t.Helper()
	client, sc := mockClient(t, b, 0)
	var got []string
	committed := make(chan struct{}, len(txns))
	value := func(rec *Record) string { v, _ := rec.Msg.Value.Encode(); return string(v) }
	hooks := Hooks{
		Admit:     func(context.Context, *Record) (bool, error) { return true, nil },
		Delivered: func(rec *Record) { got = append(got, "delivered "+value(rec)) },
		Reject: func(_ context.Context, rec *Record) error {
			got = append(got, fmt.Sprintf("rejected %s: %s", value(rec), rec.Reason))
			return nil
		},
		TooLarge: func(context.Context, *Record, error) (string, error) { return "", errors.New("unexpected too large") },
		Failed:   func(*Record, error) {},
		Fatal:    func(_ *Record, err error) error { return fmt.Errorf("fatal: %w", err) },
		Committed: func(n int, err error) {
			got = append(got, fmt.Sprintf("committed %d: %v", n, err))
			if err == nil {
				committed <- struct{}{}
			}
		},
	}
	cfg := Config{MaxGenerationBytes: 1 << 20, MaxRequestBytes: 1 << 20, Version: sc.Version, TransactionalID: txnID,
		Linger:     time.Minute, // the Commit record ends it: a transaction is one batch per partition
		RetryFirst: time.Millisecond, RetryMost: 5 * time.Millisecond, TxnBackoff: func(int) time.Duration { return time.Millisecond }}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	eng, err := New(ctx, cfg, client, hooks, func(r *Record) *Record { return r }, nil)
	if err != nil {
		return got, err
	}
	in := make(chan *Record)
	go func() {
		defer close(in)
		for i, values := range txns {
			if i > 0 {
				select {
				case <-committed:
				case <-ctx.Done():
					return
				}
			}
			for _, v := range values {
				key := keys[v]
				if key == "" {
					key = "k"
				}
				msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(v)}
				in <- &Record{Msg: msg, Size: msg.ByteSize(2)}
			}
			msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("pos")}
			in <- &Record{Msg: msg, Size: msg.ByteSize(2), Commit: true}
		}
	}()
	err = eng.Run(ctx, in, true)
	if ctx.Err() != nil {
		t.Fatalf("timed out; hooks saw %q, the broker %q", got, txnLog(b))
	}
	return got, err
}

// TestTransactionalEngine: a transactional engine adds each partition to
// the open transaction before its first batch, sends transactional batches
// under its transactional id, commits once every record is settled and
// delivers the records only then; a retriable error mid-transaction sends
// the same batch again within it, a refused record is set aside alone and
// its neighbours land in the same transaction, and a fenced producer
// delivers nothing.
func TestTransactionalEngine(t *testing.T) {
	keys := map[string]string{"B": "k2"} // k2 is in partition 1 of 2; k in 0
	cases := []struct {
		name                 string
		adds, produces, ends []any
		txns                 [][]string
		want, log            []string
		err                  error
	}{
		{
			name: "two transactions, the second after the first committed", produces: []any{ok(0, 1)},
			txns: [][]string{{"A", "B"}, {"C"}},
			want: []string{"committed 3: <nil>", "delivered A", "delivered pos", "delivered B", "committed 2: <nil>", "delivered C", "delivered pos"},
			log: []string{"init " + txnID,
				"add orders/0,orders/1 pid 7/3", "produce[" + txnID + "] txn:p0@0:A,pos txn:p1@0:B", "end commit=true",
				"add orders/0 pid 7/3", "produce[" + txnID + "] txn:p0@2:C,pos", "end commit=true"},
		},
		{
			name: "retriable errors mid-transaction: the same batch again, one commit",
			adds: []any{added(sarama.ErrConcurrentTransactions), added()}, produces: []any{refuse(sarama.ErrNotLeaderForPartition), ok(0)},
			txns: [][]string{{"A", "C"}},
			want: []string{"committed 3: <nil>", "delivered A", "delivered C", "delivered pos"},
			log: []string{"init " + txnID, "add orders/0 pid 7/3", "add orders/0 pid 7/3",
				"produce[" + txnID + "] txn:p0@0:A,C,pos", "produce[" + txnID + "] txn:p0@0:A,C,pos", "end commit=true"},
		},
		{
			name:     "a record refused mid-batch: set aside alone, its neighbours in the same transaction",
			produces: []any{refuse(sarama.ErrInvalidTimestamp, 1), ok(0)},
			txns:     [][]string{{"A", "X", "C"}},
			want: []string{"rejected X: the broker refused the record: " + sarama.ErrInvalidTimestamp.Error() + ": record 1 is bad",
				"committed 3: <nil>", "delivered A", "delivered C", "delivered pos"},
			log: []string{"init " + txnID, "add orders/0 pid 7/3",
				"produce[" + txnID + "] txn:p0@0:A,X,C,pos", "produce[" + txnID + "] txn:p0@0:A,C,pos", "end commit=true"},
		},
		{
			name: "fenced at commit: nothing delivered", produces: []any{ok(0)}, ends: []any{ended(sarama.ErrProducerFenced)},
			txns: [][]string{{"A"}}, want: []string{"committed 2: " + "commit the Kafka transaction: " + ErrFenced.Error() + ": " + sarama.ErrProducerFenced.Error()},
			log: []string{"init " + txnID, "add orders/0 pid 7/3", "produce[" + txnID + "] txn:p0@0:A,pos", "end commit=true"},
			err: sarama.ErrProducerFenced,
		},
		{
			name: "fenced at produce: the session ends, nothing delivered", produces: []any{refuse(sarama.ErrInvalidProducerEpoch)},
			txns: [][]string{{"A"}},
			log:  []string{"init " + txnID, "add orders/0 pid 7/3", "produce[" + txnID + "] txn:p0@0:A,pos"},
			err:  sarama.ErrInvalidProducerEpoch,
		},
		{
			name: "fenced while adding a partition", adds: []any{added(sarama.ErrProducerFenced)},
			txns: [][]string{{"A"}}, log: []string{"init " + txnID, "add orders/0 pid 7/3"}, err: sarama.ErrProducerFenced,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := txnCluster(t, 2, c.adds, c.produces, c.ends)
			got, err := txnRun(t, b, keys, c.txns...)
			switch {
			case c.err == nil && err != nil:
				t.Fatalf("Run = %v", err)
			case c.err != nil && (!errors.Is(err, c.err) || !errors.Is(err, ErrFenced)):
				t.Fatalf("Run = %v, want ErrFenced with %v", err, c.err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("hooks saw %q,\nwant %q", got, c.want)
			}
			if log := txnLog(b); !slices.Equal(requestsMerged(log), requestsMerged(c.log)) {
				t.Errorf("the broker saw %q,\nwant %q", log, c.log)
			}
		})
	}
}

// requestsMerged merges consecutive produce requests of a log into one, its
// batches sorted: the batches of partitions ready at nearly the same time
// go in one request or in two, as the timing falls. What the test holds
// fixed stays: which batches, and their place between adds and commits.
func requestsMerged(log []string) []string {
	var out, heads, batches []string
	flush := func() {
		if len(batches) > 0 {
			slices.Sort(heads)
			slices.Sort(batches)
			out = append(out, strings.Join(slices.Compact(heads), ",")+" "+strings.Join(batches, " "))
			heads, batches = nil, nil
		}
	}
	for _, l := range log {
		head, rest, ok := strings.Cut(l, "] ")
		if !ok || !strings.HasPrefix(head, "produce[") {
			flush()
			out = append(out, l)
			continue
		}
		heads = append(heads, head+"]")
		batches = append(batches, strings.Fields(rest)...)
	}
	flush()
	return out
}

// TestTransactionalEngineAbortsWhatRunLeftOpen: records of a transaction
// without its Commit record are appended but never delivered; Abort then
// aborts the transaction, once, and an engine with none open sends
// nothing.
func TestTransactionalEngineAbortsWhatRunLeftOpen(t *testing.T) {
	b := txnCluster(t, 1, nil, []any{ok(0)}, nil)
	client, sc := mockClient(t, b, 0)
	delivered := 0
	hooks := Hooks{
		Admit:     func(context.Context, *Record) (bool, error) { return true, nil },
		Delivered: func(*Record) { delivered++ },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{MaxGenerationBytes: 1 << 20, Version: sc.Version, TransactionalID: txnID}
	eng, err := New(ctx, cfg, client, hooks, func(r *Record) *Record { return r }, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := make(chan *Record, 2)
	for _, v := range []string{"A", "B"} {
		msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder(v)}
		in <- &Record{Msg: msg, Size: msg.ByteSize(2)}
	}
	close(in)
	if err := eng.Run(ctx, in, true); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := eng.Abort(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"init " + txnID, "add orders/0 pid 7/3", "produce[" + txnID + "] txn:p0@0:A,B", "end commit=false"}
	if log := txnLog(b); !slices.Equal(log, want) || delivered != 0 {
		t.Fatalf("the broker saw %q, %d delivered; want %q, none", log, delivered, want)
	}
}
