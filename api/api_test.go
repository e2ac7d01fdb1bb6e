package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestPostWritesOrderAndEventInOneTransaction(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := a.post(t, orderBody("o-1", "Ada", 1250, "EUR"), "traceparent", traceparent)
	if r.status != http.StatusCreated {
		t.Fatalf("status %d %s, want 201", r.status, r.body)
	}
	var got created
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "o-1" || got.Status != "created" || uuid.Validate(got.EventID) != nil {
		t.Fatalf("answer %+v", got)
	}
	if loc := r.header.Get("Location"); loc != "/orders/o-1" {
		t.Errorf("Location = %q", loc)
	}

	ctx := context.Background()
	var orderXmin, eventXmin, status, customer, currency string
	var amount int64
	err := a.pool.QueryRow(ctx, `SELECT xmin::text, status, customer, amount, currency FROM orders WHERE id = 'o-1'`).
		Scan(&orderXmin, &status, &customer, &amount, &currency)
	if err != nil {
		t.Fatal(err)
	}
	if status != "created" || customer != "Ada" || amount != 1250 || currency != "EUR" {
		t.Errorf("order row = %s %s %d %s", status, customer, amount, currency)
	}
	var eventID, aggType, aggID, eventType string
	var payload, headers map[string]any
	err = a.pool.QueryRow(ctx, `SELECT xmin::text, event_id::text, aggregate_type, aggregate_id, event_type, payload, headers
		FROM outbox`).Scan(&eventXmin, &eventID, &aggType, &aggID, &eventType, &payload, &headers)
	if err != nil {
		t.Fatal(err)
	}
	if orderXmin != eventXmin {
		t.Errorf("order written by transaction %s, event by %s: want one transaction", orderXmin, eventXmin)
	}
	if eventID != got.EventID || aggType != "orders" || aggID != "o-1" || eventType != "order.created" {
		t.Errorf("outbox row = %s %s %s %s, answer event_id %s", eventID, aggType, aggID, eventType, got.EventID)
	}
	for k, want := range map[string]any{"id": "o-1", "customer": "Ada", "amount": float64(1250), "currency": "EUR", "status": "created"} {
		if payload[k] != want {
			t.Errorf("payload[%s] = %v, want %v (payload %v)", k, payload[k], want, payload)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(payload["created_at"])); err != nil {
		t.Errorf("payload created_at: %v", err)
	}
	if len(headers) != 1 || headers["traceparent"] != traceparent {
		t.Errorf("headers = %v, want the traceparent only", headers)
	}
}

func TestPostWithoutIDOrTraceGeneratesIDAndEmptyHeaders(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	r := a.post(t, orderBody("", "Bo", 1, "USD"), "traceparent", "garbage")
	if r.status != http.StatusCreated {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	id, _ := r.json(t)["id"].(string)
	if uuid.Validate(id) != nil {
		t.Fatalf("generated id %q is not a UUID", id)
	}
	var headers string
	if err := a.pool.QueryRow(context.Background(), `SELECT headers::text FROM outbox WHERE aggregate_id = $1`, id).Scan(&headers); err != nil {
		t.Fatal(err)
	}
	if headers != "{}" {
		t.Errorf("headers = %s, want {}", headers)
	}
}

func TestFailureBetweenInsertsWritesNothing(t *testing.T) {
	t.Parallel()
	fw := &failingWriter{rowWriter: sqlWriter{}}
	a := newTestAPI(t, func(s *pgStore, _ *Config) { s.w = fw })
	for _, key := range []string{"", "key-1"} {
		var hdr []string
		if key != "" {
			hdr = []string{HeaderIdempotencyKey, key}
		}
		r := a.post(t, orderBody("o-fail", "Ada", 5, "EUR"), hdr...)
		if r.status != http.StatusInternalServerError {
			t.Fatalf("status %d %s, want 500", r.status, r.body)
		}
		if msg := r.json(t)["error"]; msg != "internal error" {
			t.Errorf("error = %q: internals must not reach the client", msg)
		}
	}
	if n := fw.ordersInserted.Load(); n != 2 {
		t.Fatalf("%d orders were inserted before the failure, want 2: the failure did not land between the inserts", n)
	}
	if c := a.counts(t); c != (rowCounts{}) {
		t.Fatalf("rows after failed transactions: %+v, want none", c)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	if r := a.post(t, orderBody("taken", "Ada", 1, "EUR")); r.status != http.StatusCreated {
		t.Fatalf("setup: %d %s", r.status, r.body)
	}
	valid := orderBody("", "Ada", 1, "EUR")
	huge := `{"customer":"` + strings.Repeat("x", 1<<20) + `","amount":1,"currency":"EUR"}`

	type tc struct {
		name        string
		contentType string // "-" sends none
		body        string
		chunked     bool // no Content-Length: the limit must hold while reading
		headers     []string
		want        int
	}
	cases := []tc{
		{name: "no content type", contentType: "-", body: valid, want: 415},
		{name: "text/plain", contentType: "text/plain", body: valid, want: 415},
		{name: "form", contentType: "application/x-www-form-urlencoded", body: "customer=Ada", want: 415},
		{name: "latin1 charset", contentType: "application/json; charset=latin1", body: valid, want: 415},
		{name: "over 1 MiB", body: huge, want: 413},
		{name: "over 1 MiB chunked", body: huge, chunked: true, want: 413},
		{name: "empty Idempotency-Key", body: valid, headers: []string{HeaderIdempotencyKey, " "}, want: 400},
		{name: "duplicate id", body: orderBody("taken", "Bo", 2, "EUR"), want: 409},
		{name: "duplicate id with key", body: orderBody("taken", "Bo", 2, "EUR"), headers: []string{HeaderIdempotencyKey, "k-dup"}, want: 409},
	}
	for _, b := range badOrderBodies {
		cases = append(cases, tc{name: b.name, body: b.body, want: 400})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := a.counts(t)
			var body = strings.NewReader(c.body)
			req, err := http.NewRequest(http.MethodPost, a.url+"/orders", body)
			if err != nil {
				t.Fatal(err)
			}
			if c.chunked {
				req.Body = io.NopCloser(struct{ io.Reader }{body}) // hides the length
				req.ContentLength = -1
			}
			if c.contentType != "-" {
				ct := c.contentType
				if ct == "" {
					ct = "application/json"
				}
				req.Header.Set("Content-Type", ct)
			}
			for i := 0; i+1 < len(c.headers); i += 2 {
				req.Header.Set(c.headers[i], c.headers[i+1])
			}
			r := do(t, req)
			if r.status != c.want {
				t.Errorf("status %d %s, want %d", r.status, r.body, c.want)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			m := r.json(t)
			if msg, _ := m["error"].(string); msg == "" || len(m) != 1 {
				t.Errorf("answer %s, want {\"error\": …} only", r.body)
			}
			if bytes.Contains(r.body, []byte("goroutine")) || bytes.Contains(r.body, []byte(".go:")) {
				t.Errorf("answer leaks internals: %s", r.body)
			}
			if after := a.counts(t); after != before {
				t.Errorf("rows changed: before %+v, after %+v", before, after)
			}
		})
	}
}

func TestIdempotencyKeyReplaysFirstAnswer(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	body := orderBody("", "Ada", 700, "GBP") // no id: the retry must not make a second one
	first := a.post(t, body, HeaderIdempotencyKey, "pay-1")
	if first.status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Error("first answer marked as replayed")
	}
	retries := []string{body, ` {"currency":"GBP","amount":700,"customer":"Ada"}`} // same order, other formatting
	for _, b := range retries {
		again := a.post(t, b, HeaderIdempotencyKey, "pay-1")
		if again.status != first.status || !bytes.Equal(again.body, first.body) {
			t.Fatalf("retry answered %d %s, want %d %s", again.status, again.body, first.status, first.body)
		}
		if again.header.Get("Idempotent-Replayed") != "true" || again.header.Get("Location") != first.header.Get("Location") {
			t.Errorf("retry headers %v", again.header)
		}
	}
	if c := a.counts(t); c != (rowCounts{1, 1, 1}) {
		t.Fatalf("rows %+v, want one order, one event, one key", c)
	}

	other := a.post(t, orderBody("", "Ada", 701, "GBP"), HeaderIdempotencyKey, "pay-1")
	if other.status != http.StatusUnprocessableEntity || !strings.Contains(other.json(t)["error"].(string), "Idempotency-Key") {
		t.Fatalf("same key, other body: %d %s, want 422", other.status, other.body)
	}
	if r := a.post(t, body, HeaderIdempotencyKey, "pay-2"); r.status != http.StatusCreated || bytes.Equal(r.body, first.body) {
		t.Fatalf("new key: %d %s, want a new order", r.status, r.body)
	}
	if c := a.counts(t); c != (rowCounts{2, 2, 2}) {
		t.Fatalf("rows %+v, want two of each", c)
	}
}

// TestConcurrentSameKeyWaitsForWinner holds the first request's transaction
// open between its inserts, sends the same key twice more (same body, other
// body) and checks that both wait on the key and then answer from the winner.
func TestConcurrentSameKeyWaitsForWinner(t *testing.T) {
	t.Parallel()
	g := newGateWriter()
	a := newTestAPI(t, func(s *pgStore, _ *Config) { s.w = g })
	body := orderBody("", "Ada", 42, "EUR")

	answers := make([]reply, 3)
	var wg sync.WaitGroup
	wg.Go(func() { answers[0] = a.post(t, body, HeaderIdempotencyKey, "race") })
	<-g.entered
	wg.Go(func() { answers[1] = a.post(t, body, HeaderIdempotencyKey, "race") })
	wg.Go(func() { answers[2] = a.post(t, orderBody("", "Ada", 43, "EUR"), HeaderIdempotencyKey, "race") })
	waitForLockWaiters(t, a, 2)
	close(g.release)
	wg.Wait()

	if answers[0].status != http.StatusCreated {
		t.Fatalf("winner: %d %s", answers[0].status, answers[0].body)
	}
	if answers[1].status != http.StatusCreated || !bytes.Equal(answers[1].body, answers[0].body) {
		t.Errorf("same body: %d %s, want the winner's %s", answers[1].status, answers[1].body, answers[0].body)
	}
	if answers[2].status != http.StatusUnprocessableEntity {
		t.Errorf("other body: %d %s, want 422", answers[2].status, answers[2].body)
	}
	if c := a.counts(t); c != (rowCounts{1, 1, 1}) {
		t.Fatalf("rows %+v, want one order", c)
	}
}

// waitForLockWaiters waits until n sessions of the test's database wait on a
// lock.
func waitForLockWaiters(t *testing.T, a *testAPI, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var waiting int
		err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait on a lock, want %d", waiting, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConcurrentSameKeyStorm(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	body := orderBody("", "Ada", 9, "SEK")
	const n = 20
	answers := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = a.post(t, body, HeaderIdempotencyKey, "storm") })
	}
	wg.Wait()
	for i, r := range answers {
		if r.status != http.StatusCreated || !bytes.Equal(r.body, answers[0].body) {
			t.Errorf("answer %d: %d %s, want %s", i, r.status, r.body, answers[0].body)
		}
	}
	if c := a.counts(t); c != (rowCounts{1, 1, 1}) {
		t.Fatalf("rows %+v, want one order", c)
	}
}

func TestHundredConcurrentPosts(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	const n = 100
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := a.post(t, orderBody("", fmt.Sprintf("c%d", i), int64(i+1), "EUR"))
			if r.status != http.StatusCreated {
				t.Errorf("post %d: %d %s", i, r.status, r.body)
				return
			}
			var c created
			if err := json.Unmarshal(r.body, &c); err != nil {
				t.Errorf("post %d: %s: %v", i, r.body, err)
			}
			ids[i] = c.ID
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct ids, want %d", len(seen), n)
	}
	if c := a.counts(t); c != (rowCounts{n, n, 0}) {
		t.Fatalf("rows %+v, want %d orders and %d events", c, n, n)
	}
	var paired int
	err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM orders o JOIN outbox e
		ON e.aggregate_id = o.id AND e.xmin = o.xmin AND e.payload->>'customer' = o.customer`).Scan(&paired)
	if err != nil {
		t.Fatal(err)
	}
	if paired != n {
		t.Fatalf("%d orders have their own event from their own transaction, want %d", paired, n)
	}
}

func TestGetOrder(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	if r := a.post(t, orderBody("g-1", "Ada", 3, "CHF")); r.status != http.StatusCreated {
		t.Fatalf("setup: %d %s", r.status, r.body)
	}
	r := a.get(t, "/orders/g-1")
	if r.status != http.StatusOK {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	var o Order
	if err := json.Unmarshal(r.body, &o); err != nil {
		t.Fatal(err)
	}
	if o.ID != "g-1" || o.Status != "created" || *o.Customer != "Ada" || *o.Amount != 3 || *o.Currency != "CHF" || o.CreatedAt.IsZero() {
		t.Fatalf("order %+v", o)
	}

	// What the worker does: GET shows the new status.
	if _, err := a.pool.Exec(context.Background(), `UPDATE orders SET status = 'processed' WHERE id = 'g-1'`); err != nil {
		t.Fatal(err)
	}
	if r := a.get(t, "/orders/g-1"); r.json(t)["status"] != "processed" {
		t.Errorf("after update: %s", r.body)
	}
	// A row written with plain SQL by another client, nulls included.
	if _, err := a.pool.Exec(context.Background(), `INSERT INTO orders (id, status) VALUES ('sql-1', 'created')`); err != nil {
		t.Fatal(err)
	}
	if r := a.get(t, "/orders/sql-1"); r.status != http.StatusOK || r.json(t)["customer"] != nil {
		t.Errorf("row with nulls: %d %s", r.status, r.body)
	}

	for _, path := range []string{"/orders/missing", "/orders/a%2Fb", "/orders/%00"} {
		r := a.get(t, path)
		if r.status != http.StatusNotFound || r.json(t)["error"] == "" {
			t.Errorf("GET %s: %d %s, want 404 with an error", path, r.status, r.body)
		}
	}
}

func TestRoutesAnswerJSON(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	tests := []struct {
		method, path string
		want         int
		allow        string
	}{
		{http.MethodGet, "/orders", 405, "POST"},
		{http.MethodDelete, "/orders/x", 405, "GET, HEAD"},
		{http.MethodGet, "/nope", 404, ""},
		{http.MethodGet, "/healthz", 200, ""},
		{http.MethodGet, "/readyz", 200, ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, a.url+tt.path, nil)
		r := do(t, req)
		if r.status != tt.want || r.header.Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d Allow=%q, want %d Allow=%q", tt.method, tt.path, r.status, r.header.Get("Allow"), tt.want, tt.allow)
		}
		r.json(t)
	}
}

func TestMetricsUseRoutePatterns(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	a.post(t, orderBody("secret-order-77", "Ada", 1, "EUR"))
	a.get(t, "/orders/secret-order-77")
	a.get(t, "/orders/unknown-order-88")
	m := string(a.get(t, "/metrics").body)
	for _, want := range []string{
		`eventforge_api_requests_total{code="201",route="POST /orders"} 1`,
		`eventforge_api_requests_total{code="200",route="GET /orders/{id}"} 1`,
		`eventforge_api_requests_total{code="404",route="GET /orders/{id}"} 1`,
		`eventforge_api_request_seconds_count{route="POST /orders"} 1`,
		`eventforge_api_orders_total{result="created"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, "order-77") || strings.Contains(m, "order-88") {
		t.Error("metrics carry an order id")
	}
}

func TestRequestTimeoutAnswers503AndWritesNothing(t *testing.T) {
	t.Parallel()
	g := newGateWriter() // never released: the request's deadline ends it
	a := newTestAPI(t, func(s *pgStore, c *Config) { s.w = g; c.RequestTimeout = 300 * time.Millisecond })
	r := a.post(t, orderBody("slow", "Ada", 1, "EUR"))
	if r.status != http.StatusServiceUnavailable || r.json(t)["error"] != "request timed out" {
		t.Fatalf("%d %s, want 503 request timed out", r.status, r.body)
	}
	if c := a.counts(t); c != (rowCounts{}) {
		t.Fatalf("rows %+v, want none", c)
	}
}
