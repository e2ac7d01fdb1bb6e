package cdc

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/cdc/eos"
)

// TestEOSItems: the relay's events as the exactly-once feeder reads them,
// and the position record it makes one of: the record that ends its Kafka
// transaction, whose metadata leads the engine back to it.
func TestEOSItems(t *testing.T) {
	var x eosItems
	for _, tc := range []struct {
		name string
		p    *pending
		want eos.Event
	}{
		{"an event", &pending{txn: 100, lsn: 50, size: 10, msg: &sarama.ProducerMessage{Topic: "t"}}, eos.Event{Txn: 100, LSN: 50, Size: 10}},
		{"a transaction's end", &pending{txn: 100, end: 110}, eos.Event{Marker: true, Txn: 100, End: 110}},
	} {
		if got := x.Of(tc.p); got != tc.want {
			t.Errorf("%s: Of = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	msg := &sarama.ProducerMessage{Topic: "positions", Key: sarama.StringEncoder("s"), Value: sarama.ByteEncoder("{}")}
	p := x.Position(msg)
	if r := p.record(); !p.ends || !r.Commit || r.Msg != msg || msg.Metadata != p || r.Size != msg.ByteSize(recordVersion) {
		t.Fatalf("Position = %+v (record %+v), want the record that ends the transaction, sized, its metadata itself", p, r)
	}
}
