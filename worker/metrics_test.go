package worker

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// fakeClock is a settable clock for deadLetterAges.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func letter(topic string, id string, offset int64) *sarama.ConsumerMessage {
	m := &sarama.ConsumerMessage{Topic: topic, Partition: 1, Offset: offset, Key: []byte("k")}
	if id != "" {
		m.Headers = []*sarama.RecordHeader{{Key: []byte(outbox.HeaderEventID), Value: []byte(id)}}
	}
	return m
}

func TestDeadLetterAges(t *testing.T) {
	id1, id2 := uuid.New(), uuid.New()
	type step struct {
		advance time.Duration
		add     *sarama.ConsumerMessage
		handled []uuid.UUID // events of topic "a" applied
		want    map[string]float64
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"no dead letters: every consumed topic at 0", []step{
			{want: map[string]float64{"a.dlq": 0, "b.dlq": 0}},
		}},
		{"age grows from the first dead letter", []step{
			{add: letter("a", id1.String(), 5)},
			{advance: 30 * time.Second, add: letter("a", id2.String(), 6)},
			{advance: 10 * time.Second, want: map[string]float64{"a.dlq": 40, "b.dlq": 0}},
		}},
		{"a replayed and applied event clears its letter", []step{
			{add: letter("a", id1.String(), 5)},
			{advance: 30 * time.Second, add: letter("a", id2.String(), 6)},
			{advance: 10 * time.Second, handled: []uuid.UUID{id1}, want: map[string]float64{"a.dlq": 10, "b.dlq": 0}},
			{handled: []uuid.UUID{id2}, want: map[string]float64{"a.dlq": 0, "b.dlq": 0}},
		}},
		{"the same event dead-lettered again keeps its first time", []step{
			{add: letter("a", id1.String(), 5)},
			{advance: 20 * time.Second, add: letter("a", id1.String(), 9)},
			{advance: 5 * time.Second, want: map[string]float64{"a.dlq": 25, "b.dlq": 0}},
		}},
		{"a CloudEvents letter (ce_id) is cleared by its event", []step{
			{add: &sarama.ConsumerMessage{Topic: "a", Partition: 1, Offset: 7,
				Headers: []*sarama.RecordHeader{{Key: []byte(outbox.HeaderCEID), Value: []byte(id1.String())}}}},
			{advance: 3 * time.Second, want: map[string]float64{"a.dlq": 3, "b.dlq": 0}},
			{handled: []uuid.UUID{id1}, want: map[string]float64{"a.dlq": 0, "b.dlq": 0}},
		}},
		{"a malformed letter is not cleared by an event", []step{
			{add: letter("b", "", 3)},
			{advance: 7 * time.Second, handled: []uuid.UUID{id1}, want: map[string]float64{"a.dlq": 0, "b.dlq": 7}},
		}},
		{"an event of another topic does not clear", []step{
			{add: letter("b", id1.String(), 3)},
			{advance: 2 * time.Second, handled: []uuid.UUID{id1}, want: map[string]float64{"a.dlq": 0, "b.dlq": 2}},
		}},
		{"a topic not consumed at start appears when it dead-letters", []step{
			{add: letter("c", id1.String(), 3)},
			{advance: time.Second, want: map[string]float64{"a.dlq": 0, "b.dlq": 0, "c.dlq": 1}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
			d := newDeadLetterAges([]string{"a", "b"}, clock.now)
			for _, s := range tc.steps {
				clock.t = clock.t.Add(s.advance)
				if s.add != nil {
					d.add(s.add)
				}
				var evs []Event
				var results []Result
				for _, id := range s.handled {
					evs = append(evs, Event{Event: outbox.Event{ID: id}, Topic: "a"})
					results = append(results, Applied)
				}
				d.handled("a", evs, results)
				if s.want != nil {
					checkAges(t, d, s.want)
				}
			}
		})
	}
}

func checkAges(t *testing.T, d *deadLetterAges, want map[string]float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(d)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for topic, w := range want {
		if g, ok := got[topic]; !ok || g != w {
			t.Errorf("age of %s = %v (present %v), want %v", topic, g, ok, w)
		}
	}
}

func TestDeadLetterAgesBounded(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	d := newDeadLetterAges([]string{"a"}, clock.now)
	d.add(letter("a", "first", 0))
	clock.t = clock.t.Add(time.Minute)
	for i := range maxPendingDeadLetters + 10 {
		d.add(letter("a", "", int64(i+1)))
	}
	if n := d.n.Load(); n != maxPendingDeadLetters {
		t.Fatalf("remembered %d dead letters, want the bound %d", n, maxPendingDeadLetters)
	}
	checkAges(t, d, map[string]float64{"a.dlq": 60})
}

func TestNewMetricsDLQSeriesAtZero(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if _, err := newMetrics(reg, "c1", []string{"orders", "payments"}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		if mf.GetName() != "eventforge_worker_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			got = append(got, fmt.Sprintf("%s %v", strings.Join(ls, ","), m.GetCounter().GetValue()))
		}
	}
	want := []string{
		"consumer=c1,result=dlq,topic=orders 0",
		"consumer=c1,result=dlq,topic=payments 0",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("eventforge_worker_events_total at start:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
