package cdc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// Outcomes of a hostile outbox row (docs/guarantees.md, "Hostile rows").
const (
	published = "published"         // in Kafka, byte for byte as the contract says
	rejected  = "rejected"          // in outbox_rejected with a reason, not in Kafka
	refused   = "refused by the db" // PostgreSQL refuses the INSERT: never in the outbox
)

// hostileRow is one outbox row written with plain SQL. An empty aggType
// means the test's own (existing) topic.
type hostileRow struct {
	name                    string
	aggType, aggID, evType  string
	payload, headers        string // jsonb text
	outcome                 string
	reason                  string // rejected: a substring of the reason
	value                   string // published: the exact record value
	extraHeaders            []string
	expectPGCode            string // refused: the SQLSTATE
	sameTxnAsGoodNeighbours bool
}

// TestHostileRowsNeverStopTheRelay writes every kind of hostile row the
// issue lists with plain SQL, each followed by a good event, through one
// relay run with topic creation off. Each row gets its defined outcome, the
// relay never restarts its session, every good event arrives and the slot
// confirms past the last write.
func TestHostileRowsNeverStopTheRelay(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	cfg := testConfig(t, url, env.Brokers)
	cfg.TopicPrefix = "" // the names under test are the topic names
	cfg.CreateTopics = false
	cfg.Compression = "none"
	good := testenv.UniqueName("hostile")
	testenv.DeleteTopicsWithPrefixAtCleanup(t, env.Brokers, good)
	missing := testenv.UniqueName("missing")
	createTopic(t, env.Brokers, good, cfg.TopicPartitions)
	db := connect(t, url)
	ctx := context.Background()

	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	huge := `{"blob": "` + strings.Repeat("x", 1_500_000) + `"}`
	longKey := strings.Repeat("k", 100_000)
	ctrlKey := "k\x01\x1f\x7f\t é\u2028😀"
	rows := []hostileRow{
		{name: "huge payload over the record limit", payload: huge, outcome: rejected, reason: "exceeds the limit of 1000000 bytes"},
		{name: "payload nested 10001 deep (PostgreSQL accepts 19999)", payload: deep(10001), outcome: rejected, reason: "exceeded max depth"},
		{name: "payload nested 5000 deep", payload: deep(5000), outcome: published, value: deep(5000)},
		{name: "headers with a value nested 10001 deep", headers: `{"h": "v", "deep": ` + deep(10001) + `}`, outcome: rejected, reason: "column headers"},
		{name: "non-string header values", headers: `{"s": "str", "n": 1, "f": 1.5, "b": true, "z": null, "o": {"k": "v"}, "a": ["x"], "": "empty name"}`,
			outcome: published, extraHeaders: []string{"", "empty name", "s", "str"}},
		{name: "headers an array", headers: `[1, "x"]`, outcome: published},
		{name: "headers a string", headers: `"x"`, outcome: published},
		{name: "headers JSON null", headers: `null`, outcome: published},
		{name: "headers spoofing event_id", headers: `{"event_id": "spoofed", "event_type": "x", "aggregate_type": "y"}`, outcome: published},
		{name: "empty aggregate_id", aggID: "", outcome: published},
		{name: "100 KB aggregate_id", aggID: longKey, outcome: published},
		{name: "control characters and unicode in the key", aggID: ctrlKey, outcome: published},
		{name: "control characters in the event type", evType: "t\x01\n", outcome: published},
		{name: "empty event type", evType: "", outcome: published},
		{name: "control characters and unicode in the payload",
			payload: `{"s": "a\u0001b\u001f\n\t\"\\ ` + "\x7f é \u2028 😀" + `", "n": 1.50, "e": 1e3, "big": 123456789012345678901234567890}`,
			outcome: published, value: `{"e":1000,"n":1.50,"s":"a\u0001b\u001f\n\t\"\\ ` + "\x7f é \u2028 😀" + `","big":123456789012345678901234567890}`},
		{name: "control characters in header values and names", headers: `{"h\u0002": "a\u0001\u001fb\n"}`,
			outcome: published, extraHeaders: []string{"h\x02", "a\x01\x1fb\n"}},
		{name: "NUL in the key", aggID: "a\x00b", outcome: refused, expectPGCode: "22021"},
		{name: "NUL escaped in the payload", payload: `{"s": "a\u0000b"}`, outcome: refused, expectPGCode: "22P05"},
		{name: "NUL escaped in the headers", headers: `{"h": "\u0000"}`, outcome: refused, expectPGCode: "22P05"},
		{name: "lone surrogate in the payload", payload: `{"s": "\ud800"}`, outcome: refused, expectPGCode: "22P02"},
		{name: "payload nested 100000 deep", payload: deep(100_000), outcome: refused, expectPGCode: "54001"},
		{name: "topic with a space", aggType: "bad topic!", outcome: rejected, reason: "Kafka allows only"},
		{name: "topic ..", aggType: "..", outcome: rejected, reason: "not allowed by Kafka"},
		{name: "topic .", aggType: ".", outcome: rejected, reason: "not allowed by Kafka"},
		{name: "empty aggregate_type", aggType: "\x00empty", outcome: rejected, reason: "empty topic name"},
		{name: "topic of 300 characters", aggType: strings.Repeat("a", 300), outcome: rejected, reason: "longer than 245"},
		{name: "__consumer_offsets", aggType: "__consumer_offsets", outcome: rejected, reason: "internal topics"},
		{name: "__-prefixed topic", aggType: "__hostile", outcome: rejected, reason: "internal topics"},
		{name: "non-ASCII topic", aggType: "ordérs", outcome: rejected, reason: "Kafka allows only"},
		{name: "control character in the topic", aggType: "orders\x01", outcome: rejected, reason: "Kafka allows only"},
		{name: "valid topic that does not exist", aggType: missing, outcome: rejected, reason: "topic does not exist"},
		{name: "invalid topic between good events of one transaction", aggType: "bad topic?", outcome: rejected, reason: "Kafka allows only", sameTxnAsGoodNeighbours: true},
		{name: "deep headers between good events of one transaction", headers: `{"deep": ` + deep(10001) + `}`, outcome: rejected, reason: "column headers", sameTxnAsGoodNeighbours: true},
	}

	r := startRelay(t, cfg)
	waitFor(t, streamingDeadline, "streaming", func() bool { return r.State() == stateStreaming })
	col := consume(t, env.Brokers, good)

	insert := `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb)`
	// Good events name no parameter types, so they work before and after
	// the schema drift below.
	insertGood := `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload) SELECT $1::text::uuid, $2, $3, $4, $5::text::jsonb`
	goodIDs := map[uuid.UUID]int{}
	writeGood := func(q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}) {
		id := uuid.New()
		if _, err := q.Exec(ctx, insertGood, id.String(), good, "good", "good.event", `{"good": true}`); err != nil {
			t.Fatal(err)
		}
		goodIDs[id] = 1
	}
	pgNow := func() (ts time.Time) {
		if err := db.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&ts); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	since := pgNow()
	ids := make([]uuid.UUID, len(rows))
	for i := range rows {
		c := &rows[i]
		switch {
		case c.aggType == "":
			c.aggType = good
		case c.aggType == "\x00empty":
			c.aggType = ""
		}
		if c.payload == "" {
			c.payload = `{"n": 1}`
		}
		if c.headers == "" {
			c.headers = `{}`
		}
		if c.aggID == "" && !strings.Contains(c.name, "empty aggregate_id") {
			c.aggID = "key-" + c.name
		}
		if c.evType == "" && c.name != "empty event type" {
			c.evType = "hostile.event"
		}
		ids[i] = uuid.New()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.sameTxnAsGoodNeighbours {
			writeGood(tx)
		}
		_, err = tx.Exec(ctx, insert, ids[i].String(), c.aggType, c.aggID, c.evType, c.payload, c.headers)
		if c.outcome == refused {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != c.expectPGCode {
				t.Errorf("%s: INSERT error = %v, want SQLSTATE %s", c.name, err, c.expectPGCode)
			}
			_ = tx.Rollback(ctx)
			writeGood(db)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.sameTxnAsGoodNeighbours {
			writeGood(tx)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		writeGood(db)
	}

	until, goodBeforeDrift := pgNow(), len(goodIDs)

	// A schema drift the decoder itself refuses: rows whose event_id is not
	// a UUID (twice, both must be recorded) and a NULL payload.
	mustExec(t, db, "ALTER TABLE outbox ALTER COLUMN event_id TYPE text, ALTER COLUMN payload DROP NOT NULL")
	// A new statement text: pgx caches the old one's parameter types.
	insertText := strings.Replace(insert, "VALUES", "/* event_id text */ VALUES", 1)
	for _, bad := range []string{"not-a-uuid-1", "not-a-uuid-2"} {
		mustExec(t, db, insertText, bad, good, "k", "e", `{}`, `{}`)
		writeGood(db)
	}
	nullPayload := uuid.New()
	mustExec(t, db, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, 'k', 'e', NULL)`, nullPayload.String(), good)
	writeGood(db)
	end := currentLSN(t, db)

	want := map[uuid.UUID]int{}
	for id := range goodIDs {
		want[id] = 1
	}
	for i, c := range rows {
		if c.outcome == published {
			want[ids[i]] = 1
		}
	}
	dups := waitDistinct(t, col, want, 90*time.Second)
	waitFor(t, 60*time.Second, "slot confirmed past the last write", func() bool { return slotConfirmed(t, db, cfg.Slot) >= end })

	reasons := map[string][]string{} // event_id -> reasons
	topics := map[string]string{}
	rs, err := db.Query(ctx, "SELECT event_id::text, topic, reason FROM outbox_rejected")
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var id, topic, reason string
		if err := rs.Scan(&id, &topic, &reason); err != nil {
			t.Fatal(err)
		}
		reasons[id] = append(reasons[id], reason)
		topics[id] = topic
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	byID := map[string]*sarama.ConsumerMessage{}
	for _, m := range col.records() {
		id, _ := header(m, "event_id")
		byID[id] = m
	}

	nRejected := 0
	for i, c := range rows {
		id := ids[i].String()
		m, inKafka := byID[id]
		switch c.outcome {
		case published:
			checkRecord(t, c, ids[i], m, cfg.TopicPartitions)
		case rejected:
			nRejected++
			if inKafka {
				t.Errorf("%s: rejected event reached Kafka", c.name)
			}
			if len(reasons[id]) != 1 || !strings.Contains(reasons[id][0], c.reason) {
				t.Errorf("%s: outbox_rejected reasons %q, want one containing %q", c.name, reasons[id], c.reason)
			} else if topics[id] != c.aggType {
				t.Errorf("%s: outbox_rejected topic %q, want %q", c.name, outbox.TruncateName(topics[id]), outbox.TruncateName(c.aggType))
			}
			t.Logf("%-55s rejected: %s", c.name, outbox.TruncateName(reasons[id][0]))
		case refused:
			if len(reasons[id]) != 0 || inKafka {
				t.Errorf("%s: refused by PostgreSQL, yet seen by the relay", c.name)
			}
		}
	}
	nilID := uuid.Nil.String()
	if n := len(reasons[nilID]); n != 2 || !strings.Contains(reasons[nilID][0], "is not a UUID") {
		t.Errorf("rows with an unreadable event_id: outbox_rejected reasons %q, want 2 naming the UUID", reasons[nilID])
	}
	if rs := reasons[nullPayload.String()]; len(rs) != 1 || !strings.Contains(rs[0], "column payload: value is NULL") {
		t.Errorf("NULL payload: outbox_rejected reasons %q", rs)
	}
	if _, ok := byID[nullPayload.String()]; ok {
		t.Error("NULL payload reached Kafka")
	}
	nRejected += 3
	if got := metricValue(t, r, "eventforge_cdc_rejected_total"); got != float64(nRejected) {
		t.Errorf("eventforge_cdc_rejected_total = %v, want %d", got, nRejected)
	}
	if n := metricValue(t, r, "eventforge_cdc_session_errors_total"); n != 0 {
		t.Errorf("eventforge_cdc_session_errors_total = %v: a hostile row restarted the session", n)
	}
	select {
	case <-r.done:
		t.Fatalf("relay stopped: %v", r.err)
	default:
	}
	if topicExists(t, env.Brokers, missing) {
		t.Error("the missing topic was created although creation is disabled")
	}
	t.Logf("%d good events and %d published hostile rows in Kafka (%d duplicates), %d rows rejected", len(goodIDs), len(want)-len(goodIDs), dups, nRejected)

	// The recovery path reads the same rows from the table: it must set the
	// same ones aside and publish the rest, never stop on one of them.
	res, err := Republish(ctx, cfg, since, until, testLogger(t))
	if err != nil {
		t.Fatalf("republish of the hostile rows: %v", err)
	}
	wantPub, wantRej := int64(goodBeforeDrift), int64(0)
	for _, c := range rows {
		switch c.outcome {
		case published:
			wantPub++
		case rejected:
			wantRej++
		}
	}
	if res.Published != wantPub || res.Rejected != wantRej {
		t.Errorf("republish: %+v, want %d published and %d rejected", res, wantPub, wantRej)
	}
}

// checkRecord compares a published hostile row's record with the contract,
// byte for byte.
func checkRecord(t *testing.T, c hostileRow, id uuid.UUID, m *sarama.ConsumerMessage, partitions int32) {
	t.Helper()
	if m == nil {
		t.Errorf("%s: not in Kafka", c.name)
		return
	}
	if m.Key == nil { // a null key would leave murmur2 partitioning
		t.Errorf("%s: null key, want %d bytes", c.name, len(c.aggID))
	}
	if string(m.Key) != c.aggID {
		t.Errorf("%s: key %q (%d bytes), want %d bytes", c.name, outbox.TruncateName(string(m.Key)), len(m.Key), len(c.aggID))
	}
	if p := kafka.PartitionForKey([]byte(c.aggID), partitions); m.Partition != p {
		t.Errorf("%s: partition %d, want murmur2's %d", c.name, m.Partition, p)
	}
	value := c.value
	if value == "" {
		value = `{"n":1}`
	}
	if string(m.Value) != value {
		t.Errorf("%s: value %q, want %q", c.name, outbox.TruncateName(string(m.Value)), outbox.TruncateName(value))
	}
	wantH := append([]string{"event_id", id.String(), "event_type", c.evType, "aggregate_type", c.aggType}, c.extraHeaders...)
	var gotH []string
	for _, h := range m.Headers {
		gotH = append(gotH, string(h.Key), string(h.Value))
	}
	if strings.Join(gotH, "\x00|") != strings.Join(wantH, "\x00|") {
		t.Errorf("%s: headers %q, want %q", c.name, gotH, wantH)
	}
}

// createTopic creates a topic for a relay that may not create it.
func createTopic(t testing.TB, brokers []string, topic string, partitions int32) {
	t.Helper()
	testenv.CreateTopic(t, brokers, topic, partitions)
	waitFor(t, 30*time.Second, "topic "+topic, func() bool { return topicExists(t, brokers, topic) })
}

// TestTopicProblem covers the names the relay refuses before asking Kafka,
// and the prefix check of Validate.
func TestTopicProblem(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders", true}, {"a.b-c_D9", true}, {strings.Repeat("a", 245), true}, {strings.Repeat("a", 246), false}, {"_single", true}, {"...", true},
		{"", false}, {".", false}, {"..", false}, {strings.Repeat("a", 250), false}, {"__consumer_offsets", false},
		{"__x", false}, {"a b", false}, {"a/b", false}, {"ordérs", false}, {"a\x00", false}, {"a\n", false},
	} {
		if got := outbox.TopicProblem(tc.name); (got == "") != tc.ok {
			t.Errorf("TopicProblem(%q) = %q, want ok %v", outbox.TruncateName(tc.name), got, tc.ok)
		}
	}
	for prefix, ok := range map[string]bool{"": true, "prod.": true, "__": false, "a b.": false} {
		cfg := validConfig()
		cfg.TopicPrefix = prefix
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("Validate with --topic-prefix %q: %v, want ok %v", prefix, err, ok)
		}
	}
}
