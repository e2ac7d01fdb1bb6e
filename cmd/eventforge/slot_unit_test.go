package main

import "testing"

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{9 << 20, "9.0 MiB"}, {3 << 30, "3.0 GiB"}, {5 << 40, "5.0 TiB"}, {2048 << 40, "2048.0 TiB"},
		{-2048, "-2.0 KiB"},
	} {
		if got := humanBytes(&tc.in); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := humanBytes(nil); got != "-" {
		t.Errorf("humanBytes(nil) = %q", got)
	}
}
