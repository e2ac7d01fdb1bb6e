package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// testAPI is a Server on its own fresh database, behind an httptest server.
type testAPI struct {
	url   string
	dbURL string
	pool  *pgxpool.Pool
	store *pgStore
	srv   *Server
}

// newTestAPI builds the API on a new database; setup may change the store
// (inject a rowWriter) or the config before the server is built.
func newTestAPI(t testing.TB, setup ...func(*pgStore, *Config)) *testAPI {
	t.Helper()
	dbURL := newDatabase(t)
	pool := newPool(t, dbURL)
	st := newPGStore(pool)
	cfg := DefaultConfig()
	for _, f := range setup {
		f(st, &cfg)
	}
	srv, err := newServer(st, cfg, testLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &testAPI{url: ts.URL, dbURL: dbURL, pool: pool, store: st, srv: srv}
}

func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// reply is an HTTP answer read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %q", r.status, r.body)
	}
	return m
}

var testClient = &http.Client{Timeout: 30 * time.Second}

// do sends req. It reports failures with t.Error, not t.Fatal, so that
// goroutines may use it; a failed request returns status 0.
func do(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := testClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", req.Method, req.URL.Path, err)
		return reply{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: read answer: %v", req.Method, req.URL.Path, err)
		return reply{}
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// post sends body to POST /orders as JSON with the extra headers.
func (a *testAPI) post(t *testing.T, body string, headers ...string) reply {
	t.Helper()
	req := mustRequest(t, http.MethodPost, a.url+"/orders", body)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return do(t, req)
}

func (a *testAPI) get(t *testing.T, path string) reply {
	t.Helper()
	return do(t, mustRequest(t, http.MethodGet, a.url+path, ""))
}

// rowCounts are the row counts of the tables a POST writes.
type rowCounts struct{ orders, outbox, keys int64 }

func (a *testAPI) counts(t *testing.T) rowCounts {
	t.Helper()
	var c rowCounts
	err := a.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM orders), (SELECT count(*) FROM outbox), (SELECT count(*) FROM api_idempotency)`).
		Scan(&c.orders, &c.outbox, &c.keys)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func orderBody(id, customer string, amount int64, currency string) string {
	m := map[string]any{"customer": customer, "amount": amount, "currency": currency}
	if id != "" {
		m["id"] = id
	}
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(m)
	return b.String()
}

// mustRequest builds a request; a body is sent as JSON.
func mustRequest(t testing.TB, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// newDatabase is a fresh migrated database on the shared local PostgreSQL
// (testenv skips it under -short, for make unit).
func newDatabase(t testing.TB) string {
	t.Helper()
	return testenv.Shared(t).NewDatabase(t)
}
