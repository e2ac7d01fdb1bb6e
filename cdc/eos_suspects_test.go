package cdc

import (
	"context"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
)

// TestEOSRefusedBatchMakesSuspects: sarama hands a batch's refusal to every
// record of it, the innocent first one included. With more than one record
// in the transaction none is set aside: the records of the refused
// partition become suspects, to be sent alone, and the others do not.
func TestEOSRefusedBatchMakesSuspects(t *testing.T) {
	mk := func(partition int32) *pending {
		p := &pending{id: uuid.New(), lsn: 100}
		p.msg = &sarama.ProducerMessage{Topic: "orders", Partition: partition}
		return p
	}
	innocent, guilty, other := mk(0), mk(0), mk(1)
	ps := &producerSession{suspects: newSuspectSet()} // no database: a rejection here would fail the test
	f := &eosFeeder{ps: ps, held: []*pending{innocent, guilty, other}}
	err := f.rejected(context.Background(), innocent, sarama.ErrInvalidTimestamp)
	if err == nil || !strings.Contains(err.Error(), "one per transaction") {
		t.Fatalf("rejected = %v, want the transaction aborted to find the refused records", err)
	}
	for _, p := range []*pending{innocent, guilty} {
		if !ps.suspects.has(p.id, p.lsn) {
			t.Errorf("event %s of the refused partition is no suspect", p.id)
		}
	}
	if ps.suspects.has(other.id, other.lsn) {
		t.Error("an event of another partition became a suspect")
	}
}
