package dlq

import (
	"errors"
	"fmt"
	"strings"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Selection picks the dead letters to replay: one event id, or all.
type Selection struct {
	EventID uuid.UUID // replay the letters of this event
	All     bool      // replay every replayable letter
}

// Plan is what a replay will do: the letters to republish (one per event
// id, the latest) and the letters it leaves, with why.
type Plan struct {
	Replay  []Letter
	Skipped []Skip
}

// Skip is a letter a replay leaves alone.
type Skip struct {
	Letter Letter
	Reason string
	// Refused marks a letter that claims another origin than its
	// dead-letter topic's: possibly forged, never replayed.
	Refused bool
}

// Refused counts the plan's refused letters.
func (p Plan) Refused() int {
	n := 0
	for _, s := range p.Skipped {
		if s.Refused {
			n++
		}
	}
	return n
}

// Select plans a replay of letters. An event dead-lettered several times is
// replayed once; letters that are not events (no valid event_id, no key, no
// original topic) are skipped, since replaying them could only fail again.
func Select(letters []Letter, sel Selection) Plan {
	var plan Plan
	latest := map[string]int{} // event id → index in plan.Replay
	for _, l := range letters {
		if !sel.All && (!l.ValidID || l.EventID != sel.EventID.String()) {
			continue
		}
		if reason := Refusal(l); reason != "" {
			plan.Skipped = append(plan.Skipped, Skip{Letter: l, Reason: reason, Refused: true})
			continue
		}
		if reason := unreplayable(l); reason != "" {
			plan.Skipped = append(plan.Skipped, Skip{Letter: l, Reason: reason})
			continue
		}
		if i, ok := latest[l.EventID]; ok {
			plan.Skipped = append(plan.Skipped, Skip{Letter: plan.Replay[i], Reason: "superseded by a later dead letter of the same event"})
			plan.Replay[i] = l
			continue
		}
		latest[l.EventID] = len(plan.Replay)
		plan.Replay = append(plan.Replay, l)
	}
	return plan
}

// Refusal says why a replay must not trust l, or "": its
// x-eventforge-original-topic header names another topic than the one its
// dead-letter topic belongs to. A worker always writes the dead letter of
// topic T to T.dlq with T in that header, so a disagreement means someone
// else wrote the record (an outbox row routed to the dead-letter topic, or a
// producer with Write on it) to steer a replay elsewhere.
func Refusal(l Letter) string {
	if l.OriginalTopic != "" && l.OriginalTopic != l.Destination() {
		return fmt.Sprintf("refused: header %s names topic %q, but the dead letter is in %s (the dead letters of %q): not written by a worker",
			outbox.HeaderDLQOriginalTopic, truncate(l.OriginalTopic, 64), l.Topic, l.Destination())
	}
	return ""
}

func unreplayable(l Letter) string {
	switch {
	case !l.ValidID:
		return "malformed: no valid event_id header"
	case l.Key == nil:
		return "malformed: no key"
	case l.OriginalTopic == "":
		return "no original topic header"
	case l.Destination() == "":
		return fmt.Sprintf("topic %s is no dead-letter topic (name ending in %s)", l.Topic, outbox.DLQSuffix)
	}
	return ""
}

// Replayed is one republished letter and where it landed.
type Replayed struct {
	Letter    Letter
	Partition int32
	Offset    int64
}

// Replay republishes the planned letters in order with a synchronous
// producer (acked before the next is sent). It stops at the first failure
// and returns what it did so far.
func Replay(producer sarama.SyncProducer, plan Plan) ([]Replayed, error) {
	done := make([]Replayed, 0, len(plan.Replay))
	for _, l := range plan.Replay {
		msg := l.Republish()
		span := traceReplay(l, msg)
		p, off, err := producer.SendMessage(msg)
		endReplay(span, p, off, err)
		if err != nil {
			return done, fmt.Errorf("republish event %s to %s: %w", l.EventID, l.Destination(), err)
		}
		done = append(done, Replayed{Letter: l, Partition: p, Offset: off})
	}
	return done, nil
}

// MaxRecordBytes is the size of the largest record the plan republishes,
// as the producer counts it, to size a producer that must accept it: the
// default limit of 1 MB would refuse a larger record that the original
// topic accepts.
func (p Plan) MaxRecordBytes() int {
	largest := 0
	for _, l := range p.Replay {
		largest = max(largest, l.Republish().ByteSize(2)) // record batches (v2): headers count
	}
	return largest
}

// CheckDestination refuses a replay destination that no dead letter may be
// put back on: a dead-letter topic itself ("x.dlq.dlq"), a Kafka internal
// topic ("__…"), or, when prefix is set (the relay's --topic-prefix), a
// topic outside it.
func CheckDestination(topic, prefix string) error {
	switch {
	case topic == "":
		return errors.New("no destination topic")
	case strings.HasSuffix(topic, outbox.DLQSuffix):
		return fmt.Errorf("destination %q is itself a dead-letter topic", topic)
	case strings.HasPrefix(topic, "__"):
		return fmt.Errorf("destination %q is a Kafka internal topic", topic)
	case prefix != "" && !strings.HasPrefix(topic, prefix):
		return fmt.Errorf("destination %q is outside the topic prefix %q", topic, prefix)
	}
	return nil
}
