package imagebuild

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// maxImageBytes bounds the image: a static binary and a CA bundle.
const maxImageBytes = 40 << 20

// TestBuiltImage inspects the image `make image` wrote
// (EVENTFORGE_IMAGE_TAR): non-root user, entrypoint, labels, the version
// label equal to what the binary inside reports, and its size.
func TestBuiltImage(t *testing.T) {
	path := os.Getenv("EVENTFORGE_IMAGE_TAR")
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("EVENTFORGE_IMAGE_TAR is not set: run make helm-check")
		}
		t.Skip("EVENTFORGE_IMAGE_TAR is not set: run make image, or make helm-check")
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	user := cf.Config.User
	if user == "" || user == "0" || strings.HasPrefix(user, "0:") || strings.HasPrefix(user, "root") {
		t.Errorf("image runs as %q, want a non-root user", user)
	}
	if user != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (the chart's runAsUser)", user)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/eventforge" {
		t.Errorf("entrypoint %v", cf.Config.Entrypoint)
	}
	for _, k := range []string{"version", "revision", "source", "licenses", "created"} {
		if cf.Config.Labels["org.opencontainers.image."+k] == "" {
			t.Errorf("no org.opencontainers.image.%s label", k)
		}
	}

	// The binary in the image reports the version its label claims.
	bin := filepath.Join(t.TempDir(), "eventforge")
	if err := os.WriteFile(bin, readFile(t, img, "eventforge"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("eventforge version: %v: %s", err, out)
	}
	label := cf.Config.Labels["org.opencontainers.image.version"]
	if got := strings.TrimSpace(string(out)); got != "eventforge "+label {
		t.Errorf("binary says %q, version label %q", got, label)
	}
	if v := os.Getenv("EVENTFORGE_VERSION"); v != "" && label != v {
		t.Errorf("version label %q, want %q (git describe)", label, v)
	}

	// Statically linked: a scratch image has no dynamic loader.
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked (PT_INTERP): build it with CGO_ENABLED=0")
		}
	}

	var total int64
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s: user %s, entrypoint %v, %d layers, %.1f MB compressed layers, tarball %.1f MB, version %s",
		path, user, cf.Config.Entrypoint, len(layers), float64(total)/1e6, float64(st.Size())/1e6, label)
	if total > maxImageBytes || st.Size() > maxImageBytes {
		t.Errorf("image %d bytes of layers, tarball %d bytes: over %d", total, st.Size(), maxImageBytes)
	}
}
