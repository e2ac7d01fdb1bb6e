package console

import (
	"slices"
	"testing"
	"time"
)

func TestEveryStepMarksADiagramNode(t *testing.T) {
	known := map[string]bool{nodeAPI: true, nodeTables: true, nodeSlot: true, nodeRelay: true, nodePartition: true, nodeWorker: true, nodeInbox: true, nodeDLQ: true}
	for _, sc := range scenarios() {
		if got, want := len(stepNodes[sc.name]), len(sc.steps); got != want {
			t.Errorf("%s: %d nodes for %d steps", sc.name, got, want)
		}
		for i := range sc.steps {
			if n := stepNode(sc.name, i); !known[n] {
				t.Errorf("%s step %d: node %q", sc.name, i+1, n)
			}
		}
	}
	if n := stepNode("journey", 99); n != "" {
		t.Errorf("past the last step: %q", n)
	}
}

func TestRaterRates(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRater()
	steps := []struct {
		v    *float64
		dt   time.Duration
		want *float64
	}{
		{nil, 0, nil},                                  // unknown counter: unknown rate
		{ptr(10.0), 0, nil},                            // first read: no rate yet
		{ptr(30.0), 2 * time.Second, ptr(10.0)},        // 20 in 2 s
		{ptr(99.0), 100 * time.Millisecond, ptr(10.0)}, // too soon: the last rate
		{ptr(34.0), 900 * time.Millisecond, ptr(4.0)},  // 1 s after the read kept (30)
		{ptr(3.0), time.Second, ptr(3.0)},              // counter reset (restart): counts from 0
	}
	for i, s := range steps {
		at = at.Add(s.dt)
		got := r.rate("x", s.v, at)
		switch {
		case (got == nil) != (s.want == nil):
			t.Fatalf("read %d: got %v, want %v", i, got, s.want)
		case got != nil && *got != *s.want:
			t.Fatalf("read %d: got %v, want %v", i, *got, *s.want)
		}
	}
}

func TestAssignWatchCountsChanges(t *testing.T) {
	var w assignWatch
	at := time.Now()
	two := []MemberView{{ID: "a", Partitions: []int32{0, 1}}, {ID: "b", Partitions: []int32{2, 3}}}
	one := []MemberView{{ID: "b", Partitions: []int32{0, 1, 2, 3}}}
	for i, c := range []struct {
		ms   []MemberView
		want int
	}{{two, 0}, {two, 0}, {one, 1}, {one, 1}, {two, 2}} {
		n, changed := w.see(c.ms, at.Add(time.Duration(i)*time.Second))
		if n != c.want {
			t.Fatalf("read %d: %d changes, want %d", i, n, c.want)
		}
		if (n > 0) != (changed != nil) {
			t.Fatalf("read %d: changed at %v with %d changes", i, changed, n)
		}
	}
}

func TestRelayStateFromMetrics(t *testing.T) {
	for _, c := range []struct {
		ms   []sample
		want string
	}{
		{[]sample{{name: "eventforge_cdc_streaming", value: 1}, {name: "eventforge_cdc_standby", value: 0}}, "active"},
		{[]sample{{name: "eventforge_cdc_streaming", value: 0}, {name: "eventforge_cdc_standby", value: 1}}, "standby"},
		{[]sample{{name: "eventforge_cdc_streaming", value: 0}}, "reconnecting"},
	} {
		if got := relayState(c.ms); got != c.want {
			t.Errorf("%v: %s, want %s", c.ms, got, c.want)
		}
	}
	active := []sample{{name: "eventforge_cdc_streaming", value: 1}}
	standby := []sample{{name: "eventforge_cdc_standby", value: 1}}
	for _, c := range []struct {
		name string
		demo []RelayView
		s    scraped
		want []RelayView
	}{
		{"no metrics address", nil, scraped{}, []RelayView{{"relay", "unknown"}}},
		{"one relay", nil, scraped{relayAddrs: []string{"a:1"}, relayByIdx: [][]sample{active}}, []RelayView{{"relay", "active"}}},
		{"active and standbys", nil, scraped{relayAddrs: []string{"a:1", "b:1", "c:1"}, relayByIdx: [][]sample{standby, active, nil}},
			[]RelayView{{"relay a:1", "standby"}, {"relay b:1", "active"}, {"relay c:1", "unreachable"}}},
		{"demo relay stopped", []RelayView{{"relay", "stopped"}}, scraped{relayAddrs: []string{"a:1"}, relayByIdx: [][]sample{active}}, []RelayView{{"relay", "stopped"}}},
	} {
		if got := relayViews(c.demo, c.s); !slices.Equal(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := (target{relayMetrics: " a:1, ,b:2 "}).relays(); !slices.Equal(got, []string{"a:1", "b:2"}) {
		t.Errorf("relay addresses %q", got)
	}
}

func TestSnapshotWhereNamesTheNode(t *testing.T) {
	f := Facts{OrderID: "order-1", Partition: 2, Partitions: 4}
	for node, want := range map[string]string{
		nodePartition: "partition p2 of 4 (murmur2 of the key order-1)",
		nodeWorker:    "the consumer group member that owns partition p2",
		nodeDLQ:       "the dead-letter topic",
		"":            "unknown",
	} {
		if got := (Snapshot{Node: node, Facts: f}).Where(); got != want {
			t.Errorf("%q: %q, want %q", node, got, want)
		}
	}
}
