package kafka

import (
	"strings"
	"testing"

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
