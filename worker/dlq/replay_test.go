package dlq

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/google/uuid"
)

func TestSelect(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	letter := func(id uuid.UUID, off int64) Letter {
		return Letter{EventID: id.String(), ValidID: true, Key: []byte("k"), OriginalTopic: "orders", Offset: off}
	}
	malformed := Letter{EventID: "nope", Key: []byte("k"), OriginalTopic: "orders", Offset: 9}
	noKey := letter(uuid.New(), 10)
	noKey.Key = nil
	letters := []Letter{letter(a, 1), letter(b, 2), letter(a, 3), malformed, noKey}

	tests := []struct {
		name        string
		sel         Selection
		wantReplay  []int64 // offsets
		wantSkipped int
	}{
		{"all: one per event, latest wins", Selection{All: true}, []int64{3, 2}, 3},
		{"one event", Selection{EventID: b}, []int64{2}, 0},
		{"event seen twice", Selection{EventID: a}, []int64{3}, 1},
		{"absent event", Selection{EventID: uuid.New()}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := Select(letters, tt.sel)
			var got []int64
			for _, l := range plan.Replay {
				got = append(got, l.Offset)
			}
			if len(got) != len(tt.wantReplay) {
				t.Fatalf("replay offsets %v, want %v", got, tt.wantReplay)
			}
			for i := range got {
				if got[i] != tt.wantReplay[i] {
					t.Fatalf("replay offsets %v, want %v", got, tt.wantReplay)
				}
			}
			if len(plan.Skipped) != tt.wantSkipped {
				t.Errorf("skipped %d (%+v), want %d", len(plan.Skipped), plan.Skipped, tt.wantSkipped)
			}
		})
	}
}

func TestPlanMaxRecordBytes(t *testing.T) {
	big := Letter{EventID: uuid.NewString(), ValidID: true, Key: []byte("k"), OriginalTopic: "orders",
		Value: make([]byte, 2<<20), Headers: []sarama.RecordHeader{{Key: []byte("event_id"), Value: []byte("x")}}}
	small := big
	small.Value = []byte("{}")
	plan := Plan{Replay: []Letter{small, big, small}}
	if got := plan.MaxRecordBytes(); got < 2<<20 || got > 2<<20+1024 {
		t.Errorf("MaxRecordBytes = %d, want just above 2 MiB", got)
	}
	if got := (Plan{}).MaxRecordBytes(); got != 0 {
		t.Errorf("empty plan: %d", got)
	}
}
