package kafka

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// javaVectors were computed by the Java client itself
// (org.apache.kafka.common.utils.Utils.murmur2 and toPositive, kafka-clients
// 4.1.1) for the UTF-8 bytes of each key.
var javaVectors = []struct {
	key           string
	hash          int32
	p12, p3, p100 int32
}{
	{"", 275646681, 9, 0, 81},
	{"a", -1563381124, 4, 1, 24},
	{"ab", 316155434, 2, 2, 34},
	{"abc", 479470107, 3, 0, 7},
	{"21", -973932308, 0, 0, 40},
	{"foobar", -790332482, 6, 0, 66},
	{"order-1", 1221710326, 10, 1, 26},
	{"order-42", 501153024, 0, 0, 24},
	{"a-little-bit-long-string", -985981536, 8, 2, 12},
	{"a-little-bit-longer-string", -1486304829, 11, 2, 19},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, 5, 2, 77},
	{"ünïcödé", 201421315, 7, 1, 15},
	{"0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21", 1389360100, 4, 1, 0},
}

func TestMurmur2MatchesJavaClient(t *testing.T) {
	for _, v := range javaVectors {
		if got := Murmur2([]byte(v.key)); got != v.hash {
			t.Errorf("Murmur2(%q) = %d, Java says %d", v.key, got, v.hash)
		}
	}
}

func TestJavaPartitionerMatchesJavaClient(t *testing.T) {
	p := NewJavaPartitioner("t")
	for _, v := range javaVectors {
		for _, c := range []struct{ n, want int32 }{{12, v.p12}, {3, v.p3}, {100, v.p100}} {
			got, err := p.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(v.key)}, c.n)
			if err != nil {
				t.Fatalf("Partition(%q): %v", v.key, err)
			}
			if got != c.want {
				t.Errorf("Partition(%q, %d) = %d, Java says %d", v.key, c.n, got, c.want)
			}
		}
	}
	if !p.RequiresConsistency() {
		t.Error("keyed partitioner must require consistency")
	}
}

func TestJavaPartitionerRefusesKeylessRecords(t *testing.T) {
	if _, err := (JavaPartitioner{}).Partition(&sarama.ProducerMessage{}, 3); err == nil {
		t.Fatal("keyless record partitioned; want ErrNoKey")
	}
}

func BenchmarkPartitionForKey(b *testing.B) {
	key := []byte("0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		PartitionForKey(key, 12)
	}
}

func TestCappedBackoff(t *testing.T) {
	f := cappedBackoff(100*time.Millisecond, time.Second)
	for retries, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second} {
		if got := f(retries, 0); got != want {
			t.Errorf("backoff(%d) = %v, want %v", retries, got, want)
		}
	}
	if got := f(1<<30, 0); got != time.Second {
		t.Errorf("backoff(huge) = %v", got)
	}
}

// BenchmarkJavaPartitioner is the partitioner as sarama calls it per record,
// with the key encoder the relay's records carry (a pointer into the record).
func BenchmarkJavaPartitioner(b *testing.B) {
	key := sarama.ByteEncoder("0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21")
	msg := &sarama.ProducerMessage{Topic: "orders", Key: &key}
	p := NewJavaPartitioner("orders")
	want := PartitionForKey(key, 12)
	b.ReportAllocs()
	for b.Loop() {
		if got, err := p.Partition(msg, 12); err != nil || got != want {
			b.Fatal(got, err)
		}
	}
}

// TestIdempotentProducerFlush checks the flush settings: by default sarama
// sends as soon as the connection is free (all three triggers zero), and a
// byte target never comes without a time bound.
func TestIdempotentProducerFlush(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         ProducerOptions
		wantBytes int
		wantWait  time.Duration
	}{
		{"default: no linger", ProducerOptions{}, 0, 0},
		{"linger", ProducerOptions{FlushMaxWait: 2 * time.Millisecond}, 0, 2 * time.Millisecond},
		{"bytes get a time bound", ProducerOptions{FlushBytes: 1 << 20}, 1 << 20, 5 * time.Millisecond},
		{"both", ProducerOptions{FlushBytes: 4096, FlushMaxWait: time.Millisecond}, 4096, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := Config{Brokers: []string{"localhost:9092"}}.IdempotentProducer(tc.o)
			f := sc.Producer.Flush
			if f.Bytes != tc.wantBytes || f.Frequency != tc.wantWait || f.Messages != 0 {
				t.Errorf("flush bytes %d, frequency %s, messages %d; want %d, %s, 0", f.Bytes, f.Frequency, f.Messages, tc.wantBytes, tc.wantWait)
			}
			if !sc.Producer.Idempotent || sc.Net.MaxOpenRequests != 1 || sc.Producer.RequiredAcks != sarama.WaitForAll {
				t.Error("docs/design.md#idempotent-producer settings changed")
			}
			if err := sc.Validate(); err != nil {
				t.Errorf("sarama rejects the configuration: %v", err)
			}
		})
	}
}
