package outboxscan

import (
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

func TestRangeWhere(t *testing.T) {
	since, until := time.Unix(100, 0), time.Unix(200, 0)
	withCol := &outbox.Catalog{Mapping: outbox.Mapping{CreatedAt: "made at"}}
	noCol := &outbox.Catalog{}
	for _, tc := range []struct {
		r       Range
		cat     *outbox.Catalog
		where   string
		args    int
		wantErr bool
	}{
		{Range{}, withCol, "TRUE", 0, false},
		{Range{}, noCol, "TRUE", 0, false},
		{Range{Since: since}, withCol, `TRUE AND "made at" >= $1`, 1, false},
		{Range{Until: until}, withCol, `TRUE AND "made at" < $1`, 1, false},
		{Range{Since: since, Until: until}, withCol, `TRUE AND "made at" >= $1 AND "made at" < $2`, 2, false},
		{Range{Since: since}, noCol, "", 0, true},
	} {
		where, args, err := tc.r.Where(tc.cat, "the test")
		if (err != nil) != tc.wantErr || where != tc.where || len(args) != tc.args {
			t.Errorf("%+v.Where(%q) = %q, %d args, %v; want %q, %d, error %v", tc.r, tc.cat.CreatedAt, where, len(args), err, tc.where, tc.args, tc.wantErr)
		}
	}
}
