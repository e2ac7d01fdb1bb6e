package produce

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

const topic = "orders"

// mockCluster is a one-broker sarama MockBroker leading every partition of
// topic; its produce requests get the responses in turn (the last one
// repeats).
func mockCluster(t *testing.T, partitions int32, responses ...any) *sarama.MockBroker {
	t.Helper()
	b := sarama.NewMockBroker(t, 1)
	t.Cleanup(b.Close)
	md := sarama.NewMockMetadataResponse(t).SetBroker(b.Addr(), b.BrokerID()).SetController(b.BrokerID())
	for p := range partitions {
		md.SetLeader(topic, p, b.BrokerID())
	}
	b.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest":       md,
		"InitProducerIDRequest": sarama.NewMockInitProducerIDResponse(t).SetProducerID(7),
		"ProduceRequest":        sarama.NewMockSequence(responses...),
	})
	return b
}

// ok is a response accepting every batch of the partitions given.
func ok(partitions ...int32) *sarama.ProduceResponse {
	r := &sarama.ProduceResponse{Version: 8}
	for _, p := range partitions {
		r.AddTopicPartition(topic, p, sarama.ErrNoError)
	}
	return r
}

// refuse is a response refusing partition 0's batch with err, naming the
// batch indexes guilty.
func refuse(err sarama.KError, guilty ...int32) *sarama.ProduceResponse {
	r := &sarama.ProduceResponse{Version: 8}
	r.AddTopicPartition(topic, 0, err)
	for _, i := range guilty {
		msg := fmt.Sprintf("record %d is bad", i)
		r.Blocks[topic][0].RecordErrors = append(r.Blocks[topic][0].RecordErrors,
			sarama.ProduceResponseRecordError{BatchIndex: i, BatchIndexErrorMessage: &msg})
	}
	return r
}

// sent lists, per produce request the broker saw, the values of its
// records by partition, partitions in order, each batch with its first
// sequence number ("p0@2:A,B"). sarama keeps a request's
// records unexported; the mock has decoded them, so they are read by
// reflection.
func sent(b *sarama.MockBroker) []string {
	var out []string
	for _, rr := range b.History() {
		if req, isProduce := rr.Request.(*sarama.ProduceRequest); isProduce {
			out = append(out, batches(req))
		}
	}
	return out
}

// batches is the batches of a produce request, in the format of sent; a
// transactional batch is marked "txn:".
func batches(req *sarama.ProduceRequest) string {
	var parts []string
	topics := reflect.ValueOf(req).Elem().FieldByName("records")
	for _, tk := range topics.MapKeys() {
		ps := topics.MapIndex(tk)
		for _, pk := range ps.MapKeys() {
			batch := ps.MapIndex(pk).FieldByName("RecordBatch").Elem()
			recs := batch.FieldByName("Records")
			var vals []string
			for i := range recs.Len() {
				vals = append(vals, string(recs.Index(i).Elem().FieldByName("Value").Bytes()))
			}
			mark := ""
			if batch.FieldByName("IsTransactional").Bool() {
				mark = "txn:"
			}
			parts = append(parts, fmt.Sprintf("%sp%d@%d:%s", mark, pk.Int(), batch.FieldByName("FirstSequence").Int(), strings.Join(vals, ",")))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// run produces values (key k for each unless keys gives one per value)
// through an engine against b and returns what the hooks saw, in order.
type run struct {
	cfg      Config
	keys     []string
	tooLarge func(*Record, error) (string, error)
	reject   error
	gap      time.Duration // between records handed over
	// readTimeout, if set, bounds the client's wait for a response.
	readTimeout time.Duration
}

// mockClient is a client of b speaking produce v8 (per-record errors),
// closed at the test's end.
func mockClient(t *testing.T, b *sarama.MockBroker, readTimeout time.Duration) (sarama.Client, *sarama.Config) {
	t.Helper()
	sc := sarama.NewConfig()
	if readTimeout > 0 {
		sc.Net.ReadTimeout = readTimeout
	}
	sc.Version = sarama.V2_4_0_0 // produce v8: per-record errors
	sc.ApiVersionsRequest = false
	sc.Metadata.Retry.Max = 1
	sc.Metadata.Retry.Backoff = time.Millisecond
	client, err := sarama.NewClient([]string{b.Addr()}, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client, sc
}

func (r run) do(t *testing.T, b *sarama.MockBroker, values ...string) ([]string, error) {
	t.Helper()
	client, sc := mockClient(t, b, r.readTimeout)
	var got []string
	value := func(rec *Record) string { v, _ := rec.Msg.Value.Encode(); return string(v) }
	hooks := Hooks{
		Admit:     func(context.Context, *Record) (bool, error) { return true, nil },
		Delivered: func(rec *Record) { got = append(got, "delivered "+value(rec)) },
		Reject: func(_ context.Context, rec *Record) error {
			if r.reject != nil {
				return r.reject
			}
			got = append(got, fmt.Sprintf("rejected %s: %s", value(rec), rec.Reason))
			return nil
		},
		TooLarge: func(_ context.Context, rec *Record, err error) (string, error) {
			if r.tooLarge == nil {
				return "", errors.New("unexpected too large")
			}
			return r.tooLarge(rec, err)
		},
		Failed: func(*Record, error) {},
		Fatal:  func(_ *Record, err error) error { return fmt.Errorf("fatal: %w", err) },
	}
	cfg := r.cfg
	if cfg.MaxGenerationBytes == 0 {
		cfg.MaxGenerationBytes = 1 << 20
	}
	cfg.Version = sc.Version
	cfg.RetryFirst, cfg.RetryMost = time.Millisecond, 5*time.Millisecond
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = cfg.MaxGenerationBytes
	}
	eng, err := New(context.Background(), cfg, client, hooks, func(r *Record) *Record { return r }, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := make(chan *Record, len(values))
	feed := func() {
		for i, v := range values {
			key := "k"
			if r.keys != nil {
				key = r.keys[i]
			}
			if i > 0 && r.gap > 0 {
				time.Sleep(r.gap)
			}
			msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(v)}
			in <- &Record{Msg: msg, Size: msg.ByteSize(2)}
		}
		close(in)
	}
	// Without a gap every record is waiting before Run starts, so the
	// requests the cases expect don't depend on how the feeding goroutine
	// is scheduled against the engine.
	if r.gap > 0 {
		go feed()
	} else {
		feed()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = eng.Run(ctx, in, true)
	if ctx.Err() != nil {
		t.Fatal("timed out")
	}
	return got, err
}

func TestEngineSettlesEveryRefusalInOrder(t *testing.T) {
	errWrite := errors.New("write outbox_rejected: connection lost")
	cases := []struct {
		name      string
		run       run
		responses []any
		values    []string
		want      []string // settlements, in order
		requests  []string // the records of each produce request
		err       string   // Run's error, "" for none
	}{
		{
			name: "retriable: the same generation again", responses: []any{refuse(sarama.ErrNotLeaderForPartition), ok(0)},
			values: []string{"A", "B"}, want: []string{"delivered A", "delivered B"}, requests: []string{"p0@0:A,B", "p0@0:A,B"},
		},
		{
			name: "guilty named: only it set aside, the rest in order", responses: []any{refuse(sarama.ErrInvalidRecord, 1), ok(0)},
			values:   []string{"X", "A", "B"},
			want:     []string{"rejected A: the broker refused the record: " + sarama.ErrInvalidRecord.Error() + ": record 1 is bad", "delivered X", "delivered B"},
			requests: []string{"p0@0:X,A,B", "p0@0:X,B"},
		},
		{
			name: "guilty not named: one record at a time finds it", responses: []any{refuse(sarama.ErrPolicyViolation), ok(0), refuse(sarama.ErrPolicyViolation), ok(0)},
			values:   []string{"X", "A", "B"},
			want:     []string{"delivered X", "rejected A: the broker refused the record: " + sarama.ErrPolicyViolation.Error(), "delivered B"},
			requests: []string{"p0@0:X,A,B", "p0@0:X", "p0@1:A", "p0@1:B"},
		},
		{
			name: "batch too large: split in halves", responses: []any{refuse(sarama.ErrMessageSizeTooLarge), ok(0)},
			values: []string{"A", "B", "C", "D"}, want: []string{"delivered A", "delivered B", "delivered C", "delivered D"},
			requests: []string{"p0@0:A,B,C,D", "p0@0:A,B", "p0@2:C,D"},
		},
		{
			name: "record too large: set aside with the caller's reason", responses: []any{refuse(sarama.ErrMessageSizeTooLarge), ok(0)},
			run:    run{tooLarge: func(*Record, error) (string, error) { return "over the topic's limit", nil }, cfg: Config{MaxGenerationRecords: 1}},
			values: []string{"A", "B"}, want: []string{"rejected A: over the topic's limit", "delivered B"}, requests: []string{"p0@0:A", "p0@0:B"},
		},
		{
			name: "record too large and unexplained: the run ends", responses: []any{refuse(sarama.ErrMessageSetSizeTooLarge)},
			run:    run{tooLarge: func(*Record, error) (string, error) { return "", errors.New("limit lowered") }},
			values: []string{"A"}, requests: []string{"p0@0:A"}, err: "limit lowered",
		},
		{
			name: "rejection not recorded: the run ends", responses: []any{refuse(sarama.ErrInvalidRecord, 0)},
			run: run{reject: errWrite}, values: []string{"A", "B"}, requests: []string{"p0@0:A,B"}, err: errWrite.Error(),
		},
		{
			name: "fatal", responses: []any{refuse(sarama.ErrTopicAuthorizationFailed)},
			values: []string{"A"}, requests: []string{"p0@0:A"}, err: "fatal: " + sarama.ErrTopicAuthorizationFailed.Error(),
		},
		{
			name: "sequence lost: a new session", responses: []any{refuse(sarama.ErrOutOfOrderSequenceNumber)},
			values: []string{"A"}, requests: []string{"p0@0:A"}, err: "new producer id",
		},
		{
			name: "retries run out", responses: []any{refuse(sarama.ErrNotEnoughReplicas)}, run: run{cfg: Config{MaxAttempts: 3}},
			values: []string{"A"}, requests: []string{"p0@0:A", "p0@0:A", "p0@0:A"}, err: "3 attempts",
		},
		{
			name: "generation cut by count", responses: []any{ok(0)}, run: run{cfg: Config{MaxGenerationRecords: 2}},
			values: []string{"A", "B", "C"}, want: []string{"delivered A", "delivered B", "delivered C"}, requests: []string{"p0@0:A,B", "p0@2:C"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := mockCluster(t, 1, c.responses...)
			got, err := c.run.do(t, b, c.values...)
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("Run = %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("Run = %v, want an error with %q", err, c.err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("settled %q,\nwant %q", got, c.want)
			}
			if reqs := sent(b); !slices.Equal(reqs, c.requests) {
				t.Errorf("produce requests %q, want %q", reqs, c.requests)
			}
		})
	}
}

// TestEnginePartitionsLikeJava checks that every record goes to the
// partition the Java client computes for its key, that partitions share a
// request, and that each partition's records keep their order.
func TestEnginePartitionsLikeJava(t *testing.T) {
	const parts = 4
	b := mockCluster(t, parts, ok(0, 1, 2, 3))
	var keys, values []string
	want := map[int32][]string{}
	for i := range 40 {
		k := fmt.Sprintf("key-%d", i%7)
		v := fmt.Sprintf("v%02d", i)
		keys, values = append(keys, k), append(values, v)
		p := kafka.PartitionForKey([]byte(k), parts)
		want[p] = append(want[p], v)
	}
	got, err := run{keys: keys}.do(t, b, values...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(values) {
		t.Fatalf("%d settled, want %d", len(got), len(values))
	}
	seen := map[int32][]string{}
	for _, req := range sent(b) {
		for _, part := range strings.Fields(req) {
			var p int32
			name, vals, _ := strings.Cut(part, ":")
			if _, err := fmt.Sscanf(name, "p%d@", &p); err != nil {
				t.Fatal(err)
			}
			seen[p] = append(seen[p], strings.Split(vals, ",")...)
		}
	}
	for p := range int32(parts) {
		if !slices.Equal(seen[p], want[p]) {
			t.Errorf("partition %d got %v, want %v", p, seen[p], want[p])
		}
	}
}

func TestConfigValidateNamesEveryField(t *testing.T) {
	err := Config{MaxGenerationRecords: -1, MaxRequestBytes: 1, MaxGenerationBytes: 10, MaxAttempts: -1, RetryFirst: -1, Timeout: -1,
		LeaderWait: -1, Version: sarama.V0_10_0_0}.Validate()
	for _, field := range []string{"MaxGenerationRecords", "MaxRequestBytes", "MaxAttempts", "RetryFirst", "Timeout", "LeaderWait", "Version"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() = %v, want it to name %s", err, field)
		}
	}
	if err := (Config{MaxGenerationBytes: 1000}).WithDefaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestEngineRandomRefusals drives the engine with random answers (accepted,
// retriable, a batch refused naming random records or none, too large) and
// checks the contract whatever happens: every record is settled exactly
// once, and the delivered ones of each partition keep their input order.
func TestEngineRandomRefusals(t *testing.T) {
	for seed := range int64(20) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(uint64(seed), 0))
			var responses []any
			for range 300 {
				switch rnd.IntN(6) {
				case 0:
					responses = append(responses, refuse(sarama.ErrNotLeaderForPartition))
				case 1:
					responses = append(responses, refuse(sarama.ErrInvalidRecord, int32(rnd.IntN(8))))
				case 2:
					responses = append(responses, refuse(sarama.ErrPolicyViolation))
				case 3:
					responses = append(responses, refuse(sarama.ErrMessageSizeTooLarge))
				default:
					responses = append(responses, ok(0))
				}
			}
			responses = append(responses, ok(0)) // the last answer repeats
			b := mockCluster(t, 1, responses...)
			var values []string
			for i := range 60 {
				values = append(values, fmt.Sprintf("v%02d", i))
			}
			r := run{cfg: Config{MaxAttempts: 1000, MaxGenerationRecords: 8},
				tooLarge: func(*Record, error) (string, error) { return "too large", nil }}
			got, err := r.do(t, b, values...)
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			settled := map[string]int{}
			var delivered []string
			for _, s := range got {
				what, rest, _ := strings.Cut(s, " ")
				v, _, _ := strings.Cut(rest, ":")
				settled[v]++
				if what == "delivered" {
					delivered = append(delivered, v)
				}
			}
			for _, v := range values {
				if settled[v] != 1 {
					t.Fatalf("%s settled %d times; settlements %q", v, settled[v], got)
				}
			}
			if !slices.IsSorted(delivered) {
				t.Fatalf("delivered out of order: %q", delivered)
			}
			t.Logf("%d delivered, %d set aside, %d requests", len(delivered), len(values)-len(delivered), len(sent(b)))
		})
	}
}

// TestEngineLinger: records handed over 20 ms apart go out one generation
// each without a linger, and as one generation within a 500 ms linger; a
// linger ends early once LingerBytes are queued.
func TestEngineLinger(t *testing.T) {
	values := []string{"A", "B", "C"}
	cases := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"no linger", Config{}, []string{"p0@0:A", "p0@1:B", "p0@2:C"}},
		{"linger", Config{Linger: 500 * time.Millisecond}, []string{"p0@0:A,B,C"}},
		{"linger ended by bytes", Config{Linger: 500 * time.Millisecond, LingerBytes: 1}, []string{"p0@0:A", "p0@1:B", "p0@2:C"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := mockCluster(t, 1, ok(0))
			if _, err := (run{cfg: c.cfg, gap: 20 * time.Millisecond}).do(t, b, values...); err != nil {
				t.Fatal(err)
			}
			if got := sent(b); !slices.Equal(got, c.want) {
				t.Errorf("produce requests %q, want %q", got, c.want)
			}
		})
	}
}
