package position

import (
	"errors"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestCovers(t *testing.T) {
	complete := Position{FinalLSN: 1000, EndLSN: 1010}
	partial := Position{FinalLSN: 1000, RowLSN: 500}
	cases := []struct {
		name       string
		p          Position
		final, row pglogrepl.LSN
		want       bool
	}{
		{"zero covers nothing", Position{}, 1, 1, false},
		{"earlier transaction", complete, 999, 998, true},
		{"earlier transaction of a partial", partial, 900, 800, true},
		{"the complete transaction", complete, 1000, 900, true},
		{"later transaction", complete, 1020, 1015, false},
		{"later transaction of a partial", partial, 1020, 400, false},
		{"partial: row before", partial, 1000, 499, true},
		{"partial: the recorded row", partial, 1000, 500, true},
		{"partial: row after", partial, 1000, 501, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.Covers(c.final, c.row); got != c.want {
				t.Fatalf("%+v.Covers(%d, %d) = %v, want %v", c.p, c.final, c.row, got, c.want)
			}
		})
	}
}

func TestMaxNeverGoesBack(t *testing.T) {
	a := Position{FinalLSN: 1000, RowLSN: 500}
	b := Position{FinalLSN: 1000, RowLSN: 700}
	c := Position{FinalLSN: 1000, EndLSN: 1010}
	d := Position{FinalLSN: 2000, RowLSN: 1500}
	order := []Position{{}, a, b, c, d}
	for i, p := range order {
		for j, q := range order {
			want := p
			if j > i {
				want = q
			}
			if got := Max(p, q); got != want {
				t.Errorf("Max(%+v, %+v) = %+v, want %+v", p, q, got, want)
			}
			if got := p.Less(q); got != (i < j) {
				t.Errorf("%+v.Less(%+v) = %v, want %v", p, q, got, i < j)
			}
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	for _, p := range []Position{
		{FinalLSN: 0x16B3748, EndLSN: 0x16B3780},
		{FinalLSN: 0x1_0000_0000, RowLSN: 0xFFFF_FF00},
	} {
		slot, got, err := Decode(Encode("eventforge", p))
		if err != nil || slot != "eventforge" || got != p {
			t.Fatalf("round trip of %+v: %q %+v %v", p, slot, got, err)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, v := range []string{
		``, `{`, `[]`, `{"version":2,"final_lsn":"0/10"}`,
		`{"version":1}`,
		`{"version":1,"final_lsn":"0/0","end_lsn":"0/20"}`,
		`{"version":1,"final_lsn":"x/10","end_lsn":"0/20"}`,
		`{"version":1,"final_lsn":"0/10"}`,                                  // neither end nor row
		`{"version":1,"final_lsn":"0/10","end_lsn":"0/20","row_lsn":"0/5"}`, // both
		`{"version":1,"final_lsn":"0/10","end_lsn":"0/10"}`,                 // end not after final
		`{"version":1,"final_lsn":"0/10","row_lsn":"0/10"}`,                 // row not below final
	} {
		if _, p, err := Decode([]byte(v)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%q) = %+v, %v; want ErrInvalid", v, p, err)
		}
	}
}

// FuzzDecode: Decode never panics, and what it accepts encodes back to a
// value that decodes to the same position.
func FuzzDecode(f *testing.F) {
	f.Add(Encode("s", Position{FinalLSN: 0x20, EndLSN: 0x30}))
	f.Add(Encode("s", Position{FinalLSN: 0x20, RowLSN: 0x10}))
	f.Add([]byte(`{"version":1,"final_lsn":"0/10","row_lsn":"0/10"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		slot, p, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		slot2, p2, err := Decode(Encode(slot, p))
		if err != nil || slot2 != slot || p2 != p {
			t.Fatalf("re-encoding %+v: %q %+v %v", p, slot2, p2, err)
		}
	})
}
