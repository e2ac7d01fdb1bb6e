package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// pageConsole is a console without connections: enough to render pages.
func pageConsole() *Console {
	return &Console{obs: &observer{t: target{slot: "s", topic: "t", group: "g", consumer: "g"}}, hub: newHub()}
}

func get(t *testing.T, h http.Handler, path string) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host = "127.0.0.1:8088"
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b), rec.Header()
}

func TestPagesRenderEveryScenarioWithoutScripts(t *testing.T) {
	h := pageConsole().Handler()
	for _, s := range scenarios() {
		for _, path := range []string{"/?scenario=" + s.name, "/steps?scenario=" + s.name} {
			code, body, hdr := get(t, h, path)
			if code != http.StatusOK {
				t.Fatalf("%s: %d", path, code)
			}
			for _, st := range s.steps {
				if !strings.Contains(body, templateEscape(st.title)) {
					t.Errorf("%s lacks step %q", path, st.title)
				}
			}
			if !strings.Contains(hdr.Get("Content-Security-Policy"), "script-src 'self'") {
				t.Errorf("%s: no CSP", path)
			}
		}
	}
	_, body, _ := get(t, h, "/")
	if !strings.Contains(body, "<noscript>") || !strings.Contains(body, `href="/steps?scenario=journey"`) {
		t.Error("the page offers no script-free reading")
	}
	if !strings.Contains(body, "Scenarios need <code>--demo</code>") {
		t.Error("read-only page does not say scenarios need --demo")
	}
}

func templateEscape(s string) string {
	return strings.NewReplacer("'", "&#39;", "\"", "&#34;", "<", "&lt;", ">", "&gt;", "&", "&amp;").Replace(s)
}

func TestStaticAssetsAreEmbedded(t *testing.T) {
	h := pageConsole().Handler()
	for _, p := range []string{"/static/app.js", "/static/style.css"} {
		code, body, _ := get(t, h, p)
		if code != http.StatusOK || len(body) < 100 {
			t.Errorf("%s: %d, %d bytes", p, code, len(body))
		}
	}
	_, body, _ := get(t, h, "/")
	if strings.Contains(body, "https://") || strings.Contains(body, "http://cdn") {
		t.Error("the page loads something from another host")
	}
}

// TestScenarioActionsExistOnlyInDemo: read-only, the routes that start,
// step and stop scenarios (and restart processes) are not served at all.
func TestScenarioActionsExistOnlyInDemo(t *testing.T) {
	h := pageConsole().Handler()
	for _, path := range []string{"/api/run", "/api/run/next", "/api/run/stop", "/steps"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"scenario":"journey"}`))
		req.Host = "localhost:8088"
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s read-only: %d %s, want 404 or 405", path, rec.Code, rec.Body)
		}
	}
}
