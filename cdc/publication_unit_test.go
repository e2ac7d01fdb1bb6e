package cdc

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCoverageError(t *testing.T) {
	ok := publicationInfo{tableExists: true, pubInsert: true, published: true}
	for _, tc := range []struct {
		name string
		info publicationInfo
		want string // "" means no error
	}{
		{"published table", ok, ""},
		{"partitioned via root", publicationInfo{tableExists: true, partitioned: true, pubInsert: true, viaRoot: true, published: true}, ""},
		{"partition published per partition", publicationInfo{tableExists: true, pubInsert: true, published: true, partitionOf: "app.outbox"}, ""},
		{"missing table", publicationInfo{}, "outbox table app.outbox does not exist"},
		{"no inserts", publicationInfo{tableExists: true, published: true}, "does not publish inserts"},
		{"partitioned per partition", publicationInfo{tableExists: true, partitioned: true, pubInsert: true}, "publish_via_partition_root = true"},
		{"partitioned via root but not published", publicationInfo{tableExists: true, partitioned: true, pubInsert: true, viaRoot: true}, "is not in publication pub"},
		{"partition of a table published via root", publicationInfo{tableExists: true, pubInsert: true, partitionOf: "app.parent"}, "set --outbox-table app.parent"},
		{"not published", publicationInfo{tableExists: true, pubInsert: true}, "ALTER PUBLICATION pub ADD TABLE app.outbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := coverageError(tc.info, "pub", "app.outbox")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("coverageError = %v, want nil", err)
				}
				return
			}
			var fe *FatalError
			if !errors.As(err, &fe) || !errors.Is(err, ErrNotPublished) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("coverageError = %v, want a FatalError containing %q", err, tc.want)
			}
		})
	}
}

func TestBackfillConfig(t *testing.T) {
	c := DefaultConfig()
	if _, asked := c.backfillRange(); asked {
		t.Fatal("default config asks for a backfill")
	}
	c.BackfillAll = true
	if r, asked := c.backfillRange(); !asked || !r.Since.IsZero() {
		t.Fatalf("BackfillAll: %+v %v", r, asked)
	}
	c.BackfillSince = time.Unix(100, 0)
	c.PGURL = "postgres://u@h/db"
	c.Kafka.Brokers = []string{"h:9092"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Fatalf("Validate with both = %v", err)
	}
	c.BackfillAll = false
	if r, asked := c.backfillRange(); !asked || !r.Since.Equal(time.Unix(100, 0)) {
		t.Fatalf("BackfillSince: %+v %v", r, asked)
	}
}
