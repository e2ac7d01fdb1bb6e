package ops

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadyzSaysWhyNotReady(t *testing.T) {
	var ready Readiness
	ok := true
	ready.Add("postgres", func(context.Context) error { return nil })
	ready.Add("relay", func(context.Context) error {
		if ok {
			return nil
		}
		return errors.New("waiting as standby")
	})
	h := Handler(NewRegistry(), &ready)

	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Fatalf("ready: code %d", code)
	}
	ok = false
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("not ready: code %d", code)
	}
	var got struct{ Reasons map[string]string }
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.Reasons["relay"] != "waiting as standby" || len(got.Reasons) != 1 {
		t.Fatalf("body = %s (err %v)", body, err)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("healthz: code %d", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics: code %d", code)
	}
}

func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want int
	}{
		{"default", nil, http.StatusNotFound},
		{"with pprof", []Option{WithPprof()}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Handler(NewRegistry(), &Readiness{}, tc.opts...)
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/cmdline"} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != tc.want {
					t.Errorf("GET %s: code %d, want %d", path, rec.Code, tc.want)
				}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("GET /metrics: code %d", rec.Code)
			}
		})
	}
}
