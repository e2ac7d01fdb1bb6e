package kafka

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func batch(first int64, producer int64, control, txn bool, keys ...string) *sarama.Records {
	rb := &sarama.RecordBatch{FirstOffset: first, ProducerID: producer, Control: control, IsTransactional: txn}
	n := max(len(keys), 1)
	rb.LastOffsetDelta = int32(n - 1)
	for i, k := range keys {
		rb.Records = append(rb.Records, &sarama.Record{OffsetDelta: int64(i), Key: []byte(k)})
	}
	return &sarama.Records{RecordBatch: rb}
}

// TestScanCommitted: records of aborted transactions and control records
// are left out, as a read_committed consumer does; committed and
// non-transactional records are visited in order from the fetch offset.
func TestScanCommitted(t *testing.T) {
	block := &sarama.FetchResponseBlock{
		RecordsSet: []*sarama.Records{
			batch(0, 1, false, true, "a", "b"),
			batch(2, 1, true, true), // commit
			batch(3, 2, false, true, "x"),
			batch(4, 1, false, true, "c", "d"),
			batch(6, 1, true, true), // abort of 1
			batch(7, 2, true, true), // commit of 2
			batch(8, 1, false, true, "e"),
			batch(9, 1, true, true), // commit
			batch(10, -1, false, false, "f"),
		},
		AbortedTransactions: []*sarama.AbortedTransaction{{ProducerID: 1, FirstOffset: 4}},
	}
	cases := []struct {
		from, end int64
		want      string
		next      int64
	}{
		{0, 11, "a b x e f", 11},
		{1, 11, "b x e f", 11},
		{0, 7, "a b x", 7}, // stops at the end offset
	}
	for _, c := range cases {
		var got []string
		next, err := scanCommitted(block, c.from, c.end, func(_ int64, r *sarama.Record) error {
			got = append(got, string(r.Key))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " ") != c.want || next != c.next {
			t.Errorf("from %d to %d: visited %q next %d, want %q next %d", c.from, c.end, got, next, c.want, c.next)
		}
	}
}

// TestReadRetriesWhenTheLeaderMoved: a fetch answered "not the leader"
// (a topic just created, a leader that moved) is retried after a metadata
// refresh, and the read then visits the partition's records; any other
// error ends the read at once.
func TestReadRetriesWhenTheLeaderMoved(t *testing.T) {
	const topic = "t"
	for _, tc := range []struct {
		name    string
		first   sarama.KError
		wantErr error
	}{
		{"not the leader", sarama.ErrNotLeaderForPartition, nil},
		{"no leader yet", sarama.ErrLeaderNotAvailable, nil},
		{"unknown topic yet", sarama.ErrUnknownTopicOrPartition, nil},
		{"out of range: no retry", sarama.ErrOffsetOutOfRange, sarama.ErrOffsetOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mb := sarama.NewMockBroker(t, 1)
			defer mb.Close()
			refused := &sarama.FetchResponse{Version: 11}
			refused.AddError(topic, 0, tc.first)
			answered := &sarama.FetchResponse{Version: 11}
			answered.AddRecord(topic, 0, nil, sarama.StringEncoder("v"), 0)
			answered.SetLastStableOffset(topic, 0, 1)
			answered.GetBlock(topic, 0).HighWaterMarkOffset = 1
			mb.SetHandlerByMap(map[string]sarama.MockResponse{
				"MetadataRequest": sarama.NewMockMetadataResponse(t).SetBroker(mb.Addr(), mb.BrokerID()).SetLeader(topic, 0, mb.BrokerID()),
				"OffsetRequest":   sarama.NewMockOffsetResponse(t).SetOffset(topic, 0, sarama.OffsetOldest, 0).SetOffset(topic, 0, sarama.OffsetNewest, 1),
				"FetchRequest":    sarama.NewMockSequence(refused, refused, answered),
			})
			sc := sarama.NewConfig()
			sc.Version = sarama.V2_8_0_0
			sc.ApiVersionsRequest = false        // the mock answers only what the read asks
			sc.Net.ReadTimeout = 2 * time.Second // and a request it does not answer fails fast
			client, err := sarama.NewClient([]string{mb.Addr()}, sc)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			var got []string
			err = ReadCommitted(t.Context(), client, topic, 0, func(_ int64, r *sarama.Record) error {
				got = append(got, string(r.Value))
				return nil
			})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || len(got) != 0 {
					t.Fatalf("read = %v, %v; want %v at once", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || len(got) != 1 || got[0] != "v" {
				t.Fatalf("read = %v, %v; want [v] after two refusals", got, err)
			}
		})
	}
}
