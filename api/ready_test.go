package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/internal/shared/migrate"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func TestReadyz(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	if r := a.get(t, "/readyz"); r.status != http.StatusOK {
		t.Fatalf("migrated database: %d %s, want 200", r.status, r.body)
	}

	closed := newPool(t, a.dbURL)
	closed.Close()

	const password = "s3cret-Passw0rd"
	unreachable, err := pgxpool.New(context.Background(),
		"postgres://eventforge:"+password+"@"+testenv.FreeAddr(t)+"/eventforge?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unreachable.Close)

	unmigrated := newPool(t, newTestAPI(t).dbURL)
	if _, err := unmigrated.Exec(context.Background(), `DROP TABLE api_idempotency`); err != nil {
		t.Fatal(err)
	}

	// Migrated for the pipeline only: no orders table.
	pipelineURL := testenv.Shared(t).NewEmptyDatabase(t)
	if _, err := migrate.URL(context.Background(), pipelineURL, migrate.Options{}); err != nil {
		t.Fatal(err)
	}
	pipelineOnly := newPool(t, pipelineURL)

	tests := []struct {
		name       string
		pool       *pgxpool.Pool
		wantReason string
	}{
		{"closed pool", closed, "database unreachable"},
		{"nothing listening", unreachable, "database unreachable"},
		{"schema missing", unmigrated, "schema missing"},
		{"migrated without the demo", pipelineOnly, "schema missing: run eventforge migrate --demo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := New(DefaultConfig(), tt.pool, testLogger(t), prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			body := rec.Body.String()
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("%d %s, want 503", rec.Code, body)
			}
			if !strings.Contains(body, tt.wantReason) || !strings.Contains(body, `"postgres"`) {
				t.Errorf("body %s, want reason %q under postgres", body, tt.wantReason)
			}
			if strings.Contains(body, password) {
				t.Errorf("body %s leaks the password", body)
			}
			// Liveness does not depend on the database.
			rec = httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("/healthz: %d", rec.Code)
			}
		})
	}
}
