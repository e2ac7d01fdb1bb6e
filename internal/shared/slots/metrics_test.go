package slots_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/internal/shared/slots"
)

// gauges gathers reg into "name{k=v,…}" → value.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestGaugesFollowObservations(t *testing.T) {
	reg := prometheus.NewRegistry()
	g, err := slots.NewGauges(reg)
	if err != nil {
		t.Fatal(err)
	}
	safe := int64(1 << 30)
	g.Observe(slots.Slot{Name: "eventforge", Active: true, WALStatus: "reserved", SafeWALSize: &safe})
	g.Observe(slots.Slot{Name: "other", WALStatus: "lost"})
	want := map[string]float64{
		"eventforge_slot_active{slot=eventforge}":                       1,
		"eventforge_slot_active{slot=other}":                            0,
		"eventforge_slot_safe_wal_size_bytes{slot=eventforge}":          1 << 30,
		"eventforge_slot_wal_status{slot=eventforge,status=reserved}":   1,
		"eventforge_slot_wal_status{slot=eventforge,status=extended}":   0,
		"eventforge_slot_wal_status{slot=eventforge,status=unreserved}": 0,
		"eventforge_slot_wal_status{slot=eventforge,status=lost}":       0,
		"eventforge_slot_wal_status{slot=other,status=reserved}":        0,
		"eventforge_slot_wal_status{slot=other,status=extended}":        0,
		"eventforge_slot_wal_status{slot=other,status=unreserved}":      0,
		"eventforge_slot_wal_status{slot=other,status=lost}":            1,
	}
	if got := gauges(t, reg); !maps.Equal(got, want) {
		t.Fatalf("gathered:\n%v\nwant:\n%v", sorted(got), sorted(want))
	}

	// The slot goes unreserved and max_slot_wal_keep_size is lifted; the
	// other one is dropped.
	g.Observe(slots.Slot{Name: "eventforge", WALStatus: "unreserved"})
	g.Forget("other")
	want = map[string]float64{
		"eventforge_slot_active{slot=eventforge}":                       0,
		"eventforge_slot_wal_status{slot=eventforge,status=reserved}":   0,
		"eventforge_slot_wal_status{slot=eventforge,status=extended}":   0,
		"eventforge_slot_wal_status{slot=eventforge,status=unreserved}": 1,
		"eventforge_slot_wal_status{slot=eventforge,status=lost}":       0,
	}
	if got := gauges(t, reg); !maps.Equal(got, want) {
		t.Fatalf("gathered:\n%v\nwant:\n%v", sorted(got), sorted(want))
	}
	if _, err := slots.NewGauges(reg); err == nil {
		t.Fatal("registering twice on one registry must fail")
	}
}

func sorted(m map[string]float64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s %g\n", k, m[k])
	}
	return b.String()
}
