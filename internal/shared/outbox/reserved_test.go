package outbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestBuildRefusesReservedHeaders: in every record format, a headers column
// that names an x-eventforge-* header (in any case) is an error, the reason
// the relay records; other names, the contract's own included, still build.
func TestBuildRefusesReservedHeaders(t *testing.T) {
	formats := map[string]*Mapping{
		"eventforge":  {},
		"cloudevents": {Format: FormatCloudEvents, CloudEventsSource: "/s"},
		"debezium":    {Format: FormatDebezium},
	}
	tests := []struct {
		headers map[string]string
		refused string // the name the error quotes; "" builds
	}{
		{map[string]string{"x-eventforge-original-topic": "victim"}, "x-eventforge-original-topic"},
		{map[string]string{"X-EventForge-Replay": "t.dlq/0@0"}, "X-EventForge-Replay"},
		{map[string]string{"b": "1", "x-eventforge-error": "e", "x-eventforge-attempts": "1"}, "x-eventforge-attempts"},
		{map[string]string{"x-eventforgeish": "ok", "traceparent": "00-a-b-01", "event_id": "spoof"}, ""},
		// the two that pick a registry schema are the writer's to set
		{map[string]string{"x-eventforge-schema-id": "7", "X-EventForge-Schema-Version": "2"}, ""},
	}
	for name, m := range formats {
		b := NewBuilder("p.").WithFormat(m)
		for _, tt := range tests {
			e := &Event{ID: uuid.New(), AggregateType: "orders", AggregateID: "k", EventType: "t", Payload: []byte(`{}`), Headers: tt.headers}
			var r Record
			err := b.Build(&r, e)
			if tt.refused == "" {
				if err != nil {
					t.Errorf("%s %v: %v", name, tt.headers, err)
				}
				continue
			}
			if !errors.Is(err, ErrReservedHeader) || !strings.Contains(err.Error(), tt.refused) {
				t.Errorf("%s %v: Build = %v, want the reserved header %s named", name, tt.headers, err, tt.refused)
			}
		}
	}
	if _, err := Message(&Event{ID: uuid.New(), AggregateType: "o", Payload: []byte(`{}`), Headers: map[string]string{"x-EVENTFORGE-consumer": "c"}}, ""); !errors.Is(err, ErrReservedHeader) {
		t.Errorf("Message = %v", err)
	}
}
