package bench

import (
	"context"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestEndMarkerCoversAsyncCommits: the end of a backlog written with
// synchronous_commit off is at or past every commit record inserted. An end
// read from the WAL write position (pg_current_wal_lsn) may lie before
// commits still in the WAL buffers: the readers then stop early and the
// relay is stopped before it published the rest.
func TestEndMarkerCoversAsyncCommits(t *testing.T) {
	env := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := newDatabase(ctx, env.PGURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.drop()
	pool, err := db.writerPool(ctx, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i := range 5 {
		if _, err := pool.Exec(ctx, bulkInsert, i*100+1, i*100+100, "t", int64(0)); err != nil {
			t.Fatal(err)
		}
		inserted, err := db.lsn(ctx, "SELECT pg_current_wal_insert_lsn()::text")
		if err != nil {
			t.Fatal(err)
		}
		end, err := db.endMarker(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if end < inserted {
			t.Fatalf("write %d: end %s is before the inserted WAL %s", i, end, inserted)
		}
	}
}
