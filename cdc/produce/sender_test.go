package produce

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestBatchAllocatesPerGeneration: a generation's record batch costs the
// same few allocations for 1 record as for 1,000 (the records and their
// header pointers come from one array each), and every record keeps its
// own key, value, headers and offset delta.
func TestBatchAllocatesPerGeneration(t *testing.T) {
	e := &Engine[*Record]{}
	now := time.Now()
	gen := func(n int) *generation {
		g := &generation{part: &partition{partKey: partKey{topic, 0}}}
		for i := range n {
			hs := []sarama.RecordHeader{{Key: []byte("id"), Value: []byte(fmt.Sprint(i))}}
			if i%2 == 0 { // records with different header counts
				hs = append(hs, sarama.RecordHeader{Key: []byte("even"), Value: []byte("y")})
			}
			msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(fmt.Sprint("k", i)),
				Value: sarama.ByteEncoder(fmt.Sprint("v", i)), Timestamp: now.Add(time.Duration(i) * time.Millisecond), Headers: hs}
			g.records = append(g.records, &Record{Msg: msg})
		}
		return g
	}
	for _, n := range []int{1, 1000} {
		g := gen(n)
		if allocs := testing.AllocsPerRun(10, func() { e.batch(g) }); allocs > 4 {
			t.Errorf("%d records: %v allocations per batch, want at most 4", n, allocs)
		}
		rb := e.batch(g)
		for i, rec := range rb.Records {
			want := 1 + (i+1)%2
			if string(rec.Key) != fmt.Sprint("k", i) || string(rec.Value) != fmt.Sprint("v", i) || rec.OffsetDelta != int64(i) ||
				rec.TimestampDelta != time.Duration(i)*time.Millisecond || len(rec.Headers) != want || string(rec.Headers[0].Value) != fmt.Sprint(i) {
				t.Fatalf("%d records: record %d = %+v, headers %d", n, i, rec, len(rec.Headers))
			}
		}
	}
}
