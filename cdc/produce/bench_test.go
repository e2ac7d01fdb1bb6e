package produce

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/testsupport/benchcpu"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// BenchmarkEngine produces b.N records of ~250 bytes through the engine to
// a real broker (the shared local one, a fresh 6-partition topic), over 1,
// 10 and 100,000 keys, as a backlog handed over at once. It reports
// records per produce request; the relay's own drain is measured by
// `eventforge bench --shapes bulk,bulk:1,bulk:10`.
func BenchmarkEngine(b *testing.B) {
	env := testenv.Shared(b)
	for _, keys := range []int{1, 10, 100000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			topic := testenv.UniqueName("bench")
			admin, err := sarama.NewClusterAdmin(env.Brokers, kafka.Config{Brokers: env.Brokers}.Base())
			if err != nil {
				b.Fatal(err)
			}
			defer admin.Close()
			if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 6, ReplicationFactor: 1}, false); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = admin.DeleteTopic(topic) }()
			sc := kafka.Config{Brokers: env.Brokers}.Base()
			client, err := sarama.NewClient(env.Brokers, sc)
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			var requests atomic.Int64
			hooks := Hooks{
				Admit:     func(context.Context, *Record) (bool, error) { return true, nil },
				Delivered: func(*Record) {},
				Reject:    func(_ context.Context, r *Record) error { return fmt.Errorf("rejected: %s", r.Reason) },
				TooLarge:  func(_ context.Context, _ *Record, err error) (string, error) { return "", err },
				Failed:    func(*Record, error) {},
				Fatal:     func(_ *Record, err error) error { return err },
				Produced:  func() { requests.Add(1) },
			}
			eng, err := New(context.Background(), Config{MaxGenerationBytes: 1 << 20, Version: sc.Version}, client, hooks, func(r *Record) *Record { return r }, nil)
			if err != nil {
				b.Fatal(err)
			}
			value := make([]byte, 200)
			in := make(chan *Record, b.N)
			for i := range b.N {
				msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(i % keys)), Value: sarama.ByteEncoder(value), Timestamp: time.Now()}
				in <- &Record{Msg: msg, Size: msg.ByteSize(2)}
			}
			close(in)
			b.ResetTimer()
			if err := eng.Run(context.Background(), in, true); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(b.N)/float64(max(requests.Load(), 1)), "records/request")
		})
	}
}

// BenchmarkBatch is the engine's per-record work in building a
// generation's record batch (what sarama then encodes): 1,000 records of
// three headers each, as the relay's.
func BenchmarkBatch(b *testing.B) {
	e := &Engine[*Record]{cfg: Config{Codec: sarama.CompressionLZ4}}
	value := make([]byte, 200)
	now := time.Now()
	g := &generation{part: &partition{partKey: partKey{topic, 0}}}
	for i := range 1000 {
		key := sarama.ByteEncoder(fmt.Sprint(i % 10))
		msg := &sarama.ProducerMessage{Topic: topic, Key: key, Value: sarama.ByteEncoder(value), Timestamp: now,
			Headers: []sarama.RecordHeader{{Key: []byte("id"), Value: []byte("0c5b6f43")}, {Key: []byte("type"), Value: []byte("t")}, {Key: []byte("agg"), Value: []byte("a")}}}
		g.records = append(g.records, &Record{Msg: msg, Size: msg.ByteSize(2)})
	}
	b.ReportAllocs()
	clock := benchcpu.Start()
	for b.Loop() {
		rb := e.batch(g)
		if len(rb.Records) != len(g.records) || len(rb.Records[999].Headers) != 3 {
			b.Fatal("short batch")
		}
	}
	clock.Report(b, len(g.records), "record")
}
