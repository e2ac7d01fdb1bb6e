package position

import (
	"context"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestReadKeepsTheSlotsLatest: Read returns the highest position recorded
// for its slot, whatever order the records came in, and leaves out other
// slots' records and deletions.
func TestReadKeepsTheSlotsLatest(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	topic := testenv.UniqueName("position")
	testenv.DeleteTopicsAtCleanup(t, env.Brokers, topic)
	testenv.CreateTopic(t, env.Brokers, topic, 1)
	sc := sarama.NewConfig()
	sc.Producer.Partitioner = sarama.NewManualPartitioner
	sc.Producer.Return.Successes = true
	sc.Producer.RequiredAcks = sarama.WaitForAll
	prod, err := sarama.NewSyncProducer(env.Brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	latest := Position{FinalLSN: 300, EndLSN: 310}
	records := []struct {
		key   string
		value []byte
	}{
		{"s1", Encode("s1", Position{FinalLSN: 100, EndLSN: 110})},
		{"s1", Encode("s1", latest)},
		{"s2", Encode("s2", Position{FinalLSN: 900, EndLSN: 910})}, // another slot's
		{"s1", nil}, // a deletion
		{"s1", Encode("s1", Position{FinalLSN: 200, RowLSN: 150})}, // lower than the latest
		{"s2", []byte("not a position")},                           // another slot's: never decoded
	}
	for _, r := range records {
		msg := &sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.StringEncoder(r.key)}
		if r.value != nil {
			msg.Value = sarama.ByteEncoder(r.value)
		}
		if _, _, err := prod.SendMessage(msg); err != nil {
			t.Fatal(err)
		}
	}
	client, err := sarama.NewClient(env.Brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, tc := range []struct {
		slot string
		want Position
	}{{"s1", latest}, {"s3", Position{}}} {
		got, err := Read(context.Background(), client, topic, tc.slot)
		if err != nil || got != tc.want {
			t.Errorf("Read(%s) = %+v, %v; want %+v", tc.slot, got, err, tc.want)
		}
	}
	if _, err := Read(context.Background(), client, topic, "s2"); err == nil {
		t.Errorf("Read(s2) read a record that is not a position without an error")
	}
}
