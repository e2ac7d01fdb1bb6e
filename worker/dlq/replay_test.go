package dlq

import (
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/google/uuid"
)

func TestSelect(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	letter := func(id uuid.UUID, off int64) Letter {
		return Letter{Topic: "orders.dlq", EventID: id.String(), ValidID: true, Key: []byte("k"), OriginalTopic: "orders", Offset: off}
	}
	malformed := Letter{Topic: "orders.dlq", EventID: "nope", Key: []byte("k"), OriginalTopic: "orders", Offset: 9}
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

// TestReplayGoesToTheDeadLetterTopicsOwnOrigin: the destination comes from
// the dead-letter topic's name; a letter whose origin header names another
// topic (an outbox row or a producer steering a replay) is refused.
func TestReplayGoesToTheDeadLetterTopicsOwnOrigin(t *testing.T) {
	id := uuid.NewString()
	record := func(origin string) *sarama.ConsumerMessage {
		hs := []*sarama.RecordHeader{{Key: []byte("event_id"), Value: []byte(id)}, {Key: []byte("X-EventForge-Extra"), Value: []byte("x")}}
		if origin != "" {
			hs = append(hs, &sarama.RecordHeader{Key: []byte("x-eventforge-original-topic"), Value: []byte(origin)})
		}
		return &sarama.ConsumerMessage{Topic: "team.orders.dlq", Key: []byte("k"), Value: []byte(`{"amount":100000}`), Headers: hs}
	}
	tests := []struct {
		name, origin string
		refused      bool
	}{
		{"a worker's letter", "team.orders", false},
		{"steered to another team's topic", "other.payments", true},
		{"steered to a look-alike", "team.orders.dlq", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Decode(record(tt.origin))
			plan := Select([]Letter{l}, Selection{All: true})
			if tt.refused {
				if len(plan.Replay) != 0 || plan.Refused() != 1 || !strings.Contains(Refusal(l), tt.origin) {
					t.Fatalf("plan %+v: want the letter refused", plan)
				}
				return
			}
			if len(plan.Replay) != 1 || plan.Refused() != 0 {
				t.Fatalf("plan %+v: want the letter replayed", plan)
			}
			m := plan.Replay[0].Republish()
			if m.Topic != "team.orders" {
				t.Fatalf("replayed to %q, want team.orders", m.Topic)
			}
			for _, h := range m.Headers {
				if strings.EqualFold(string(h.Key), "x-eventforge-extra") {
					t.Errorf("replay keeps the forged header %s", h.Key)
				}
			}
		})
	}
}

func TestCheckDestination(t *testing.T) {
	tests := []struct {
		topic, prefix, want string
	}{
		{"team.orders", "", ""},
		{"team.orders", "team.", ""},
		{"other.orders", "team.", "outside the topic prefix"},
		{"team.orders.dlq", "", "itself a dead-letter topic"},
		{"__consumer_offsets", "", "internal topic"},
		{"", "", "no destination"},
	}
	for _, tt := range tests {
		err := CheckDestination(tt.topic, tt.prefix)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckDestination(%q, %q) = %v, want %q", tt.topic, tt.prefix, err, tt.want)
		}
	}
}
