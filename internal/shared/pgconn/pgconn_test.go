package pgconn

import (
	"strings"
	"testing"
)

func TestRedactHidesPasswords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:s3cret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://u@h/db?password=s3cret", "postgres://u@h/db?password=xxxxx"},
		{"host=h user=u password=s3cret", "(connection string hidden)"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseConfigErrorKeepsPasswordSecret(t *testing.T) {
	_, err := ParseConfig("postgres://u:s3cret@h:notaport/db")
	if err == nil {
		t.Fatal("bad port accepted")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error leaks the password: %v", err)
	}
}
