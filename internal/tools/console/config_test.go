package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eventforge/eventforge/internal/shared/kafka"
)

func TestConfigValidateCollectsEveryError(t *testing.T) {
	cfg := Config{Demo: true}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("empty config accepted")
	}
	for _, want := range []string{"--http-addr", "PostgreSQL URL", "Kafka brokers", "binary"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	ok := DefaultConfig()
	ok.PGURL, ok.Kafka = "postgres://x/y", kafka.Config{Brokers: []string{"k:9092"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults with a URL and brokers: %v", err)
	}
	ok.Slot = ""
	if err := ok.Validate(); err == nil || !strings.Contains(err.Error(), "--slot") {
		t.Fatalf("read-only without a slot: %v", err)
	}
}

func TestSameOriginRefusesCrossSitePosts(t *testing.T) {
	h := sameOrigin(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	cases := []struct {
		method, origin string
		want           int
	}{
		{http.MethodPost, "", http.StatusNoContent},
		{http.MethodPost, "http://console.test", http.StatusNoContent},
		{http.MethodPost, "http://evil.test", http.StatusForbidden},
		{http.MethodPost, "null", http.StatusForbidden},
		{http.MethodGet, "http://evil.test", http.StatusNoContent},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, "http://console.test/api/run/stop", nil)
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s with Origin %q: %d, want %d", c.method, c.origin, rec.Code, c.want)
		}
	}
}

func TestEveryScenarioIsDescribed(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range scenarios() {
		if seen[s.name] || s.title == "" || s.summary == "" || s.outcome == "" || len(s.steps) == 0 {
			t.Errorf("scenario %q: duplicate name or missing text", s.name)
		}
		seen[s.name] = true
		for i, st := range s.steps {
			if st.title == "" || st.explain == "" || st.do == nil {
				t.Errorf("scenario %s step %d incomplete", s.name, i+1)
			}
		}
	}
	if n := len(journey().steps); n != 10 {
		t.Errorf("the journey has %d steps, want 10", n)
	}
}
