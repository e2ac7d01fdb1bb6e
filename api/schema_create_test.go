package api

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eventforge/eventforge/internal/shared/migrate"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestAPICreatesItsTablesAfterPipelineMigrate: `eventforge migrate` creates
// only the pipeline's schema, and `api run` on that database creates the
// orders tables it writes, so the quickstart's migrate + api run works;
// with --create-tables=false it stays not ready and says what to run.
func TestAPICreatesItsTablesAfterPipelineMigrate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		create    string
		wantReady bool
	}{
		{"creates", "true", true},
		{"asked not to", "false", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := testenv.Shared(t).NewEmptyDatabase(t)
			if _, err := migrate.URL(context.Background(), url, migrate.Options{}); err != nil {
				t.Fatal(err)
			}
			httpAddr := testenv.FreeAddr(t)
			cmd := exec.Command(testenv.Binary(t), "api", "run", "--create-tables="+tt.create)
			cmd.Env = append(os.Environ(), "EVENTFORGE_PG_URL="+url, "EVENTFORGE_HTTP_ADDR="+httpAddr)
			exited, stderr := startAPI(t, cmd)
			if !tt.wantReady {
				waitReadyzSays(t, "http://"+httpAddr+"/readyz", "run eventforge migrate --demo")
				return
			}
			waitReady(t, "http://"+httpAddr+"/readyz", exited)
			r := do(t, mustRequest(t, http.MethodPost, "http://"+httpAddr+"/orders", orderBody("tables-1", "Ada", 5, "EUR")))
			if r.status != http.StatusCreated {
				t.Fatalf("POST: %d %s; stderr:\n%s", r.status, r.body, stderr.String())
			}
			if !strings.Contains(stderr.String(), "created the API's tables") {
				t.Errorf("no log line about the created tables:\n%s", stderr.String())
			}
		})
	}
}

// waitReadyzSays waits until url answers 503 with want in its body.
func waitReadyzSays(t *testing.T, url, want string) {
	t.Helper()
	testenv.WaitFor(t, 20*time.Second, "readyz says "+want, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false // not listening yet
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), want)
	})
}
