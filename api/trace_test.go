package api

import (
	"net/http"
	"testing"
)

func TestTraceHeaders(t *testing.T) {
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name        string
		traceparent string
		tracestate  string
		want        map[string]string
	}{
		{"none", "", "", map[string]string{}},
		{"valid", valid, "", map[string]string{"traceparent": valid}},
		{"with state", valid, "congo=t61rcWkgMzE", map[string]string{"traceparent": valid, "tracestate": "congo=t61rcWkgMzE"}},
		{"state without parent", "", "congo=t61rcWkgMzE", map[string]string{}},
		{"upper case hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "", map[string]string{}},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", map[string]string{}},
		{"zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "", map[string]string{}},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", map[string]string{}},
		{"version 00 with extra", valid + "-extra", "", map[string]string{}},
		{"future version with extra", "01" + valid[2:] + "-extra", "", map[string]string{"traceparent": "01" + valid[2:] + "-extra"}},
		{"short", valid[:54], "", map[string]string{}},
		{"bad separator", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", map[string]string{}},
		{"state with control char", valid, "a=b\x01", map[string]string{"traceparent": valid}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.traceparent != "" {
				h.Set("Traceparent", tt.traceparent)
			}
			if tt.tracestate != "" {
				h.Set("Tracestate", tt.tracestate)
			}
			got := traceHeaders(h)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func FuzzTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
	f.Fuzz(func(t *testing.T, s string) {
		if validTraceparent(s) && (len(s) < 55 || !printableASCII(s)) {
			t.Fatalf("accepted %q", s)
		}
	})
}
