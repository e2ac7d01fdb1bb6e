package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// recipeBlock is one fenced code block of a recipe in the docs.
type recipeBlock struct{ lang, body string }

var fence = regexp.MustCompile("(?s)```(\\w+)\\n(.*?)```")

// docRecipe returns the code blocks between <!-- recipe: name --> and
// <!-- /recipe --> in the file doc (relative to the repository root), in
// order.
func docRecipe(t *testing.T, doc, name string) []recipeBlock {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- recipe: "+name+" -->")
	body, _, ok2 := strings.Cut(rest, "<!-- /recipe -->")
	if !ok || !ok2 {
		t.Fatalf("%s has no recipe %q", doc, name)
	}
	var out []recipeBlock
	for _, m := range fence.FindAllStringSubmatch(body, -1) {
		out = append(out, recipeBlock{lang: m[1], body: m[2]})
	}
	return out
}

// TestDebeziumRecipe runs docs/debezium.md's "Switching from Debezium"
// recipe as written, on a database that has only the application's
// Debezium-shaped outbox: sql blocks run in the database, sh lines in a
// shell (eventforge is the binary under test; a line ending in & runs in
// the background: the relay, which the test waits for until it streams),
// and a text block is the output the previous command must print, read by
// kcat, a client independent of EventForge. The test's own environment: a
// private database, slot and topic prefix (the kcat line's topic follows
// the prefix).
func TestDebeziumRecipe(t *testing.T) {
	t.Parallel()
	env := testenv.Shared(t)
	if _, err := exec.LookPath("kcat"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kcat is not installed (.ci/run installs it)")
		}
		t.Skip("kcat is not installed")
	}
	url := env.NewEmptyDatabase(t)
	slot := testenv.UniqueName("slot")
	prefix := testenv.UniqueName("r") + ".outbox.event."
	testenv.DeleteTopicsWithPrefixAtCleanup(t, env.Brokers, prefix)
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testenv.Binary(t), filepath.Join(bin, "eventforge")); err != nil {
		t.Fatal(err)
	}
	shellEnv := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"EVENTFORGE_PG_URL="+url,
		"EVENTFORGE_KAFKA_BROKERS="+strings.Join(env.Brokers, ","),
		"EVENTFORGE_SLOT="+slot,
		"EVENTFORGE_TOPIC_PREFIX="+prefix,
		"EVENTFORGE_HEARTBEAT_INTERVAL=1s",
	)
	db, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())

	blocks := docRecipe(t, "docs/debezium.md", "debezium")
	if len(blocks) < 5 {
		t.Fatalf("recipe has %d blocks", len(blocks))
	}
	var lastOut string
	for _, b := range blocks {
		switch b.lang {
		case "sql":
			// The connector's slot has a name of its own per test: slot
			// names are the server's, shared by every database.
			body := strings.ReplaceAll(b.body, "'debezium'", "'"+slot+"'")
			if _, err := db.Exec(t.Context(), body); err != nil {
				t.Fatalf("recipe SQL:\n%s\n%v", b.body, err)
			}
		case "sh":
			for _, line := range strings.Split(b.body, "\n") {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				line = strings.ReplaceAll(line, " outbox.event.", " "+prefix)
				line = strings.ReplaceAll(line, "--slot debezium ", "--slot "+slot+" ")
				if bg, ok := strings.CutSuffix(line, "&"); ok {
					startBackground(t, shellEnv, bg)
					waitStreaming(t, db, slot)
					continue
				}
				lastOut = runRetrying(t, shellEnv, line)
			}
		case "text":
			if got, want := strings.TrimSpace(lastOut), strings.TrimSpace(b.body); got != want {
				t.Fatalf("output\n%s\nwant (docs/debezium.md)\n%s", got, want)
			}
		default:
			t.Fatalf("recipe block of language %q", b.lang)
		}
	}
}

// startBackground starts a shell line that runs until the test ends; then
// it gets SIGTERM, as from a terminal.
func startBackground(t *testing.T, env []string, line string) {
	t.Helper()
	out := &testenv.Buffer{}
	cmd := exec.Command("sh", "-c", "exec "+line)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v\n%s", line, err, out)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("%s did not stop on SIGTERM\n%s", line, out)
		}
	})
}

// waitStreaming waits until the relay reads its slot: rows inserted from
// then on are in it.
func waitStreaming(t *testing.T, db *pgx.Conn, slot string) {
	t.Helper()
	testenv.WaitFor(t, 60*time.Second, "relay streaming from "+slot, func() bool {
		var active bool
		err := db.QueryRow(t.Context(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		return err == nil && active
	})
}

// runRetrying runs a shell line until it succeeds (a consumer started before
// the relay created its topic fails), for at most a minute.
func runRetrying(t *testing.T, env []string, line string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err == nil {
			return string(out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v\n%s%s", line, err, out, stderr.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}
