package cdc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// debeziumSlot creates what a Debezium PostgreSQL connector leaves behind:
// a pgoutput slot and a publication of all tables (its default
// publication.autocreate.mode), and points cfg at them.
func debeziumSlot(t *testing.T, db *pgx.Conn, cfg *Config) {
	t.Helper()
	cfg.Slot, cfg.Publication = testenv.UniqueName("debezium"), testenv.UniqueName("dbz_publication")
	mustExec(t, db, `CREATE PUBLICATION `+cfg.Publication+` FOR ALL TABLES`)
	mustExec(t, db, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, cfg.Slot)
}

// insertEvents commits n outbox rows, one transaction each, and returns
// their ids in commit order.
func insertEvents(t *testing.T, db *pgx.Conn, table string, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
		mustExec(t, db, `INSERT INTO `+table+` VALUES ($1, 'Order', 'order-1', 'OrderCreated', '{"n": 1}')`, ids[i])
	}
	return ids
}

// TestTakeOverDebeziumSlot: the relay started on a Debezium connector's
// slot and publication resumes exactly where the connector's confirmations
// stopped: the events it consumed are not sent again, every later one is
// sent once, in commit order.
func TestTakeOverDebeziumSlot(t *testing.T) {
	t.Parallel()
	env, db, cfg := newDebeziumOutbox(t, "jsonb")
	debeziumSlot(t, db, &cfg)

	// The connector reads and confirms the first three events, then stops
	// while two more are committed; two more follow once the relay runs.
	consumed := insertEvents(t, db, cfg.Mapping.Table, 3)
	upto := currentLSN(t, db)
	var changes int
	err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_logical_slot_get_binary_changes($1, $2::pg_lsn, NULL,
		'proto_version', '1', 'publication_names', $3)`, cfg.Slot, upto.String(), cfg.Publication).Scan(&changes)
	if err != nil || changes < 3*3 { // BEGIN, INSERT, COMMIT (and RELATION) per transaction
		t.Fatalf("the connector's read: %d messages, %v", changes, err)
	}
	confirmed := slotConfirmed(t, db, cfg.Slot)
	if confirmed < upto {
		t.Fatalf("slot confirmed %s, before %s", confirmed, upto)
	}
	pending := insertEvents(t, db, cfg.Mapping.Table, 2)

	topic := streamDebezium(t, cfg, env.Brokers)
	pending = append(pending, insertEvents(t, db, cfg.Mapping.Table, 2)...)
	col := consume(t, env.Brokers, topic)
	waitFor(t, 30*time.Second, "the events after the connector's position", func() bool { return col.len() >= len(pending) })
	time.Sleep(time.Second) // an overlap would arrive with them
	var got []string
	for _, msg := range col.records() {
		id, _ := header(msg, "id")
		got = append(got, id)
	}
	want := make([]string, len(pending))
	for i, id := range pending {
		want[i] = id.String()
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("records %v\nwant %v (the connector had consumed %v)", got, want, consumed)
	}
	waitFor(t, 30*time.Second, "the relay confirms on the slot", func() bool { return slotConfirmed(t, db, cfg.Slot) > confirmed })
}

// TestTakeOverRefusals: a slot of another plugin (Debezium's decoderbufs or
// wal2json; test_decoding here) and a publication without the outbox
// table stop the relay at once with a line that says so.
func TestTakeOverRefusals(t *testing.T) {
	env := testenv.Shared(t)
	url := env.NewDatabase(t)
	db := connect(t, url)
	for _, c := range []struct {
		name  string
		setup func(cfg *Config)
		want  []string
		kind  error
	}{
		{"plugin", func(cfg *Config) {
			debeziumSlot(t, db, cfg)
			mustExec(t, db, `SELECT pg_drop_replication_slot($1)`, cfg.Slot)
			mustExec(t, db, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, cfg.Slot)
		}, []string{"decodes with plugin test_decoding", "pgoutput only", "plugin.name=pgoutput"}, ErrSlotMismatch},
		{"publication", func(cfg *Config) {
			cfg.Publication = testenv.UniqueName("dbz_publication")
			other := testenv.UniqueName("other")
			mustExec(t, db, `CREATE TABLE `+other+` (id int)`)
			mustExec(t, db, `CREATE PUBLICATION `+cfg.Publication+` FOR TABLE `+other)
		}, []string{"is not in publication", "ALTER PUBLICATION"}, ErrNotPublished},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := debeziumOutbox(t, db, url, env.Brokers, "jsonb")
			c.setup(&cfg)
			err := startRelay(t, cfg).waitFatal(t, c.kind)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
