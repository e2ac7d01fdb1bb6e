package tracing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestOneTraceFromOrderToEffect runs the API, the relay and the worker as
// the real binary against a real Jaeger on loopback and asserts, from
// Jaeger's query API, that an order placed with a traceparent and an event
// written with plain SQL each give one trace with the api → relay → worker
// parent chain and the messaging attributes, and that the relay's and the
// worker's histograms carry their trace ids as exemplars.
func TestOneTraceFromOrderToEffect(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local services and Jaeger")
	}
	env := testenv.Shared(t)
	root := repoRoot(t)
	jaeger := startJaeger(t, root)
	bin := buildBinary(t, root)
	url := env.NewDatabase(t)
	prefix := testenv.UniqueName("tr") + "."
	topic := prefix + "orders"
	createTopic(t, env.Brokers, topic)
	testenv.DeleteTopicsAtCleanup(t, env.Brokers, topic, topic+".dlq")

	common := []string{"EVENTFORGE_PG_URL=" + url, "EVENTFORGE_KAFKA_BROKERS=" + strings.Join(env.Brokers, ","),
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + jaeger.otlpHTTP, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=test"}
	apiAddr, relayAddr, workerAddr := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	handlers := deadLetterUnknown(t, root)
	start(t, bin, common, "api", "api", "run", "--create-tables", "--http-addr", apiAddr)
	start(t, bin, common, "relay", "cdc", "run", "--slot", strings.ReplaceAll(prefix, ".", "_")+"slot",
		"--topic-prefix", prefix, "--metrics-addr", relayAddr)
	// The worker exports over gRPC: both protocols are exercised.
	start(t, bin, append(common, "OTEL_EXPORTER_OTLP_ENDPOINT="+jaeger.otlpGRPC, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"), "worker",
		"worker", "run", "--group", prefix+"g", "--topics", topic, "--handlers", handlers,
		"--metrics-addr", workerAddr)
	for _, a := range []string{apiAddr, relayAddr, workerAddr} {
		testenv.WaitFor(t, 60*time.Second, a+" ready", func() bool { return get(t, "http://"+a+"/readyz", "") != "" })
	}

	// Through the API, continuing the client's trace.
	clientTrace, clientSpan := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	order, eventID := postOrder(t, apiAddr, "00-"+clientTrace+"-"+clientSpan+"-01")
	// Plain SQL, joining its own trace through the headers column.
	sqlTrace, sqlSpan := "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	sqlOrder, sqlEvent := "sql-"+prefix, "5f0c1c0e-8d3f-4a43-9b4d-1c2a3e4f5a6b"
	dlqTrace := "5b8aa5a2d2c872e8321cf37308d69df2" // the dead letter's, below
	insertSQLOrder(t, url, sqlOrder, sqlEvent, "00-"+sqlTrace+"-"+sqlSpan+"-01")

	for _, c := range []struct {
		name, trace, parent, order, event string
		api                               bool
	}{
		{"api", clientTrace, clientSpan, order, eventID, true},
		{"plain sql", sqlTrace, sqlSpan, sqlOrder, sqlEvent, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			spans := waitTrace(t, jaeger.query, c.trace, 3-boolInt(!c.api))
			parent := c.parent
			if c.api {
				a := one(t, spans, "eventforge-api", "POST /orders")
				a.wantParent(t, parent)
				a.wantTags(t, map[string]string{"span.kind": "server", "http.route": "/orders", "messaging.message.id": c.event,
					"eventforge.aggregate_id": c.order, "http.response.status_code": "201"})
				parent = a.SpanID
			}
			r := one(t, spans, "eventforge-relay", "send "+topic)
			r.wantParent(t, parent)
			r.wantTags(t, map[string]string{"span.kind": "producer", "messaging.system": "kafka", "messaging.destination.name": topic,
				"messaging.message.id": c.event, "messaging.destination.partition.id": "0", "messaging.kafka.message.key": c.order})
			r.wantPresent(t, "messaging.kafka.offset", "eventforge.commit_to_ack_seconds")
			w := one(t, spans, "eventforge-worker", "process "+topic)
			w.wantParent(t, r.SpanID)
			w.wantTags(t, map[string]string{"span.kind": "consumer", "messaging.system": "kafka", "messaging.message.id": c.event,
				"eventforge.result": "applied", "eventforge.attempt": "1", "eventforge.aggregate_id": c.order,
				"messaging.consumer.group.name": prefix + "g"})
		})
	}

	t.Run("dead letter and replay", func(t *testing.T) {
		// An event of a type the handlers do not know is dead-lettered;
		// its replay, and the worker's second try, stay in its trace.
		insertEvent(t, url, "dl-"+prefix, "6e4c1c0e-8d3f-4a43-9b4d-1c2a3e4f5a6c", "order.unknown", "00-"+dlqTrace+"-051581bf3cb55c13-01")
		spans := waitTrace(t, jaeger.query, dlqTrace, 2)
		r := one(t, spans, "eventforge-relay", "send "+topic)
		w := one(t, spans, "eventforge-worker", "process "+topic)
		w.wantParent(t, r.SpanID)
		w.wantTags(t, map[string]string{"eventforge.result": "dead-lettered", "otel.status_code": "ERROR"})
		var out strings.Builder
		cmd := exec.Command(bin, "dlq", "replay", "--topic", topic+".dlq", "--all")
		cmd.Env = append(append(os.Environ(), common...), "OTEL_BSP_SCHEDULE_DELAY=10")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("dlq replay: %v\n%s", err, out.String())
		}
		spans = waitTrace(t, jaeger.query, dlqTrace, 4)
		rp := one(t, spans, "eventforge-dlq", "send "+topic)
		rp.wantParent(t, w.SpanID)
		rp.wantTags(t, map[string]string{"span.kind": "producer", "messaging.message.id": "6e4c1c0e-8d3f-4a43-9b4d-1c2a3e4f5a6c"})
		found := false
		for _, s := range spans {
			if s.service == "eventforge-worker" && s.SpanID != w.SpanID {
				s.wantParent(t, rp.SpanID)
				found = true
			}
		}
		if !found {
			t.Error("no worker span for the replayed record")
		}
	})

	// Exemplars (OpenMetrics) link the histograms to the traces. A bucket
	// keeps its latest exemplar: the dead letter's event may have replaced
	// the orders' in theirs.
	for _, m := range []struct{ addr, metric string }{
		{relayAddr, "eventforge_cdc_commit_to_ack_seconds_bucket"}, {workerAddr, "eventforge_worker_apply_seconds_bucket"},
	} {
		body := get(t, "http://"+m.addr+"/metrics", "application/openmetrics-text; version=1.0.0")
		re := regexp.MustCompile(m.metric + `\{[^}]*\} \d+ # \{trace_id="(` + clientTrace + `|` + sqlTrace + `|` + dlqTrace + `)"\}`)
		if !re.MatchString(body) {
			t.Errorf("%s has no exemplar with a trace id of the test", m.metric)
		}
	}
}

type jaegerInstance struct{ otlpHTTP, otlpGRPC, query string }

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// startJaeger starts a private Jaeger with deploy/local/jaeger.sh (which
// builds it the first time) and stops it at cleanup.
func startJaeger(t *testing.T, root string) jaegerInstance {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(root, "deploy/local/jaeger.sh")
	if out, err := exec.Command(script, "start", dir).CombinedOutput(); err != nil {
		t.Fatalf("jaeger.sh start: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("jaeger.sh stop: %v\n%s", err, out)
		}
	})
	out, err := exec.Command(script, "env", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	var j jaegerInstance
	for _, line := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "OTEL_EXPORTER_OTLP_ENDPOINT":
			j.otlpHTTP = v
		case "OTEL_EXPORTER_OTLP_GRPC_ENDPOINT":
			j.otlpGRPC = v
		case "JAEGER_QUERY_URL":
			j.query = v
		}
	}
	return j
}

func buildBinary(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "eventforge")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/eventforge")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// start runs bin with args and env in the background; cleanup stops it with
// SIGTERM (so it flushes its spans) and shows its log when the test failed.
func start(t *testing.T, bin string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "OTEL_SERVICE_NAME=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="), env...)
	testenv.StartProcess(t, name, cmd, syscall.SIGTERM, 20*time.Second)
}

func get(t *testing.T, url, accept string) string {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(body)
}

func postOrder(t *testing.T, addr, traceparent string) (order, eventID string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/orders",
		strings.NewReader(`{"customer":"c-1","amount":1200,"currency":"EUR"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		ID      string `json:"id"`
		EventID string `json:"event_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /orders: %d, %v", resp.StatusCode, err)
	}
	return body.ID, body.EventID
}

// deadLetterUnknown writes the demo's handlers with unknown event types
// dead-lettered instead of skipped.
func deadLetterUnknown(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy/handlers/orders.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "handlers.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "unknown: skip", "unknown: dlq", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// insertEvent writes an outbox row alone, its headers carrying traceparent.
func insertEvent(t *testing.T, url, key, eventID, eventType, traceparent string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
		VALUES ($1, 'orders', $2, $3, '{}', jsonb_build_object('traceparent', $4::text))`, eventID, key, eventType, traceparent)
	if err != nil {
		t.Fatal(err)
	}
}

func insertSQLOrder(t *testing.T, url, order, eventID, traceparent string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	err = pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), `INSERT INTO orders (id, status, customer, amount, currency) VALUES ($1, 'created', 'sql', 4200, 'EUR')`, order); err != nil {
			return err
		}
		_, err := tx.Exec(t.Context(), `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
			VALUES ($1, 'orders', $2, 'order.created', jsonb_build_object('id', $2::text, 'amount', 4200, 'currency', 'EUR'),
			jsonb_build_object('traceparent', $3::text))`, eventID, order, traceparent)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func createTopic(t *testing.T, brokers []string, topic string) {
	t.Helper()
	testenv.CreateTopic(t, brokers, topic, 1)
}

// span is a span as Jaeger's query API returns it.
type span struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	ProcessID     string `json:"processID"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	service string
}

func (s span) tag(key string) (string, bool) {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return fmt.Sprint(tg.Value), true
		}
	}
	return "", false
}

func (s span) wantParent(t *testing.T, id string) {
	t.Helper()
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.SpanID == id {
			return
		}
	}
	t.Errorf("%s %q: references %+v, want CHILD_OF %s", s.service, s.OperationName, s.References, id)
}

func (s span) wantTags(t *testing.T, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.tag(k); !ok || got != v {
			t.Errorf("%s %q: %s = %q (present %v), want %q", s.service, s.OperationName, k, got, ok, v)
		}
	}
}

func (s span) wantPresent(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := s.tag(k); !ok {
			t.Errorf("%s %q: no %s attribute", s.service, s.OperationName, k)
		}
	}
}

// waitTrace polls Jaeger until the trace has at least n spans.
func waitTrace(t *testing.T, query, traceID string, n int) []span {
	t.Helper()
	var spans []span
	testenv.WaitFor(t, 60*time.Second, fmt.Sprintf("%d spans of trace %s in Jaeger", n, traceID), func() bool {
		body := get(t, query+"/api/traces/"+traceID, "")
		var resp struct {
			Data []struct {
				Spans     []span `json:"spans"`
				Processes map[string]struct {
					ServiceName string `json:"serviceName"`
				} `json:"processes"`
			} `json:"data"`
		}
		if body == "" || json.Unmarshal([]byte(body), &resp) != nil || len(resp.Data) != 1 {
			return false
		}
		spans = resp.Data[0].Spans
		for i := range spans {
			spans[i].service = resp.Data[0].Processes[spans[i].ProcessID].ServiceName
		}
		return len(spans) >= n
	})
	return spans
}

// one returns the only span of service named name.
func one(t *testing.T, spans []span, service, name string) span {
	t.Helper()
	var found []span
	for _, s := range spans {
		if s.service == service && s.OperationName == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		var all []string
		for _, s := range spans {
			all = append(all, s.service+":"+s.OperationName)
		}
		t.Fatalf("%d spans %s %q in the trace, want 1; spans: %v", len(found), service, name, all)
	}
	return found[0]
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
