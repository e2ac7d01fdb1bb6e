package topics

import (
	"strings"
	"testing"
)

func TestDurabilityWarning(t *testing.T) {
	safe := Conf{MinInsyncReplicas: 2, ReplicationFactor: 3}
	with := func(f func(*Conf)) Conf { c := safe; f(&c); return c }
	tests := []struct {
		name   string
		conf   Conf
		broker int
		want   []string // parts of the warning; none: no warning
	}{
		{"single broker", Conf{MinInsyncReplicas: 1, ReplicationFactor: 1}, 1, nil},
		{"two brokers, min.insync 1", with(func(c *Conf) { c.MinInsyncReplicas, c.ReplicationFactor = 1, 2 }), 2, nil},
		{"three brokers, default min.insync", with(func(c *Conf) { c.MinInsyncReplicas = 1 }), 3, []string{"min.insync.replicas=1", "--topic-min-insync-replicas"}},
		{"five brokers, default min.insync", with(func(c *Conf) { c.MinInsyncReplicas = 1 }), 5, []string{"min.insync.replicas=1"}},
		{"three brokers, min.insync 2", safe, 3, nil},
		{"three brokers, min.insync 3", with(func(c *Conf) { c.MinInsyncReplicas = 3 }), 3, nil},
		{"unknown broker count", with(func(c *Conf) { c.MinInsyncReplicas = 1 }), 0, nil},
		{"replication factor 1 on two brokers", with(func(c *Conf) { c.ReplicationFactor, c.MinInsyncReplicas = 1, 1 }), 2,
			[]string{"replication factor 1", "--topic-replication-factor"}},
		{"replication factor unknown", with(func(c *Conf) { c.ReplicationFactor = 0 }), 3, nil},
		{"unclean election", with(func(c *Conf) { c.UncleanElection = true }), 3, []string{"unclean.leader.election.enable=true"}},
		{"all at once, one line", Conf{MinInsyncReplicas: 1, ReplicationFactor: 2, UncleanElection: true}, 3,
			[]string{"min.insync.replicas=1", "unclean.leader.election.enable=true", "cluster of 3 brokers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := DurabilityWarning("orders", tt.conf, tt.broker)
			if (w != "") != (len(tt.want) > 0) {
				t.Fatalf("DurabilityWarning(%+v, brokers=%d) = %q, want a warning: %v", tt.conf, tt.broker, w, len(tt.want) > 0)
			}
			for _, part := range tt.want {
				if !strings.Contains(w, part) {
					t.Errorf("warning %q lacks %q", w, part)
				}
			}
			if w != "" && (!strings.Contains(w, "orders") || strings.Contains(w, "\n")) {
				t.Fatalf("warning %q must be one line naming the topic", w)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	l := NewLimits(10000, nil)
	if got := l.Current(); got != 10000 {
		t.Fatalf("Current() = %d, want the configured 10000", got)
	}
	l.Set("a", 50000)
	l.Set("b", 3000)
	if got := l.Current(); got != 3000 {
		t.Fatalf("Current() = %d, want the smallest topic limit 3000", got)
	}
}

func TestDetail(t *testing.T) {
	d := Detail(Settings{Partitions: 3, ReplicationFactor: -1})
	if d.NumPartitions != 3 || d.ReplicationFactor != -1 || d.ConfigEntries != nil {
		t.Fatalf("detail %+v: want 3 partitions, the broker's replication factor and min.insync.replicas", d)
	}
	if v := Detail(Settings{MinInsyncReplicas: 2}).ConfigEntries["min.insync.replicas"]; v == nil || *v != "2" {
		t.Fatalf("min.insync.replicas not set: %v", v)
	}
}
