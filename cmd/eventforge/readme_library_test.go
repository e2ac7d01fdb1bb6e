package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestReadmeLibraryExampleBuildsOutsideTheModule builds README.md's library
// example (between <!-- recipe: library --> and <!-- /recipe -->) as the
// main package of a module of its own that requires this one through a
// replace, with a second file using the relay's and the API's public
// surface: an exported API that needs an internal package fails here with
// "use of internal package ... not allowed", and an example that drifted
// from the API fails to compile.
func TestReadmeLibraryExampleBuildsOutsideTheModule(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a module: not a -short unit test")
	}
	blocks := docRecipe(t, "README.md", "library")
	if len(blocks) != 1 || blocks[0].lang != "go" {
		t.Fatalf("the library recipe must be one go block, got %d blocks", len(blocks))
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/shipping\n\ngo 1.26\n\n" +
		"require github.com/eventforge/eventforge v0.0.0\n\n" +
		"replace github.com/eventforge/eventforge => " + root + "\n"
	files := map[string]string{"go.mod": gomod, "main.go": blocks[0].body, "surface.go": librarySurface}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(dir, "shipping"), ".")
	build.Dir = dir
	// -mod=mod resolves the example's requirements (the product's own) into
	// the temp module from the module cache or the proxy.
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the README library example does not build outside the module: %v\n%s", err, out)
	}
}

// librarySurface uses the rest of the public API beside the README's
// example: the relay with a readiness registrar of its own and a mapping,
// the API server's config, an Event built as a handler's test would.
const librarySurface = `package main

import (
	"context"

	"github.com/eventforge/eventforge/api"
	"github.com/eventforge/eventforge/cdc"
	"github.com/eventforge/eventforge/worker"
	"github.com/eventforge/eventforge/worker/kafkaconf"
)

type registrar struct{}

func (registrar) Add(string, func(context.Context) error) {}

var (
	_ = func() error {
		cfg := cdc.DefaultConfig()
		cfg.Kafka = kafkaconf.Config{Security: kafkaconf.Security{SASL: &kafkaconf.SASLConfig{Mechanism: kafkaconf.MechanismPlain}}}
		cfg.Mapping = cdc.Mapping{Format: "cloudevents"}
		_, err := cdc.New(cfg, nil, nil, registrar{})
		return err
	}
	_ = api.DefaultConfig()
	_ = worker.Event{Event: worker.OutboxEvent{EventType: "order.created", PayloadKind: worker.PayloadJSON}}
)
`
