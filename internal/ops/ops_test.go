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
