package pgconn_test

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	ipg "github.com/eventforge/eventforge/internal/shared/pgconn"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestURLCarriesTLSAndPasswordSources pins what EventForge relies on from
// pgx: sslmode/sslrootcert/sslcert/sslkey in the URL make a verifying TLS
// configuration that the replication connection's copy keeps, and the
// password may come from passfile= or PGPASSWORD instead of the URL.
func TestURLCarriesTLSAndPasswordSources(t *testing.T) {
	certs := testenv.NewCerts(t, t.TempDir())
	passfile := filepath.Join(t.TempDir(), "pgpass")
	if err := os.WriteFile(passfile, []byte("db.example:5432:*:alice:from-passfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "postgres://alice@db.example:5432/eventforge"
	for _, tc := range []struct {
		name, query, env string
		wantTLS          bool
		wantPassword     string
	}{
		{"verify-full", "sslmode=verify-full&sslrootcert=" + certs.CAFile, "", true, ""},
		{"client certificate", fmt.Sprintf("sslmode=verify-full&sslrootcert=%s&sslcert=%s&sslkey=%s", certs.CAFile, certs.ClientCert, certs.ClientKey), "", true, ""},
		{"disable", "sslmode=disable", "", false, ""},
		{"passfile", "sslmode=disable&passfile=" + passfile, "", false, "from-passfile"},
		{"PGPASSWORD", "sslmode=disable", "from-env", false, "from-env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PGPASSWORD", tc.env)
			if tc.env == "" {
				os.Unsetenv("PGPASSWORD")
			}
			cfg, err := ipg.ParseConfig(base + "?" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			repl := cfg.Config.Copy() // as cdc builds its replication connection
			for name, c := range map[string]*pgconn.Config{"sql": &cfg.Config, "replication": repl} {
				if got := c.TLSConfig != nil; got != tc.wantTLS {
					t.Fatalf("%s: TLS %v, want %v", name, got, tc.wantTLS)
				}
				if tc.wantTLS {
					checkVerifying(t, c.TLSConfig)
				}
				if len(c.Fallbacks) != 0 && tc.wantTLS {
					t.Fatalf("%s: verify-full must not fall back to plaintext", name)
				}
				if c.Password != tc.wantPassword {
					t.Fatalf("%s: password %q, want %q", name, c.Password, tc.wantPassword)
				}
			}
		})
	}
}

// checkVerifying checks the server is verified. The client certificate of
// sslcert/sslkey is loaded per connection by a loader pgx keeps private
// (Config.Copy keeps it too, pgx v5.13), so only parsing is checked for it.
func checkVerifying(t *testing.T, tc *tls.Config) {
	t.Helper()
	if tc.InsecureSkipVerify && tc.VerifyPeerCertificate == nil {
		t.Fatal("TLS does not verify the server")
	}
	if tc.ServerName != "db.example" || tc.RootCAs == nil {
		t.Fatalf("TLS server name %q, roots %v", tc.ServerName, tc.RootCAs != nil)
	}
}

func TestRedactHidesSSLPassword(t *testing.T) {
	got := ipg.Redact("postgres://u:pw1@h/db?sslmode=verify-full&sslkey=/k.pem&sslpassword=pw2")
	if strings.Contains(got, "pw1") || strings.Contains(got, "pw2") || !strings.Contains(got, "sslkey=") {
		t.Fatalf("Redact = %q", got)
	}
}
