package imagebuild

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// files lists the flattened file system of img by path.
func files(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = h
	}
}

// readFile returns the content of path in img.
func readFile(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	b, err := ReadFile(img, path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBuildWritesANonRootImage builds an image around a stand-in binary and
// reads the tarball back: config, labels, files, owners and modes.
func TestBuildWritesANonRootImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "eventforge")
	if err := os.WriteFile(bin, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	out := filepath.Join(dir, "image.tar")
	c := Config{Binary: bin, CACerts: ca, Ref: "eventforge:v1.2.3", Version: "v1.2.3", Revision: "abc", Source: "https://example.com/eventforge", Created: created}
	if _, err := Write(c, out); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || strings.Join(cf.Config.Entrypoint, " ") != "/eventforge" || cf.Config.WorkingDir != Home {
		t.Errorf("config user %q entrypoint %v workdir %q", cf.Config.User, cf.Config.Entrypoint, cf.Config.WorkingDir)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Equal(created) {
		t.Errorf("platform %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	want := map[string]string{
		"org.opencontainers.image.version":  "v1.2.3",
		"org.opencontainers.image.revision": "abc",
		"org.opencontainers.image.source":   "https://example.com/eventforge",
		"org.opencontainers.image.licenses": "NOASSERTION",
		"org.opencontainers.image.created":  "2026-12-03T08:00:00Z",
	}
	for k, v := range want {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	fs := files(t, img)
	if h := fs["eventforge"]; h == nil || h.Mode != 0o755 || h.Uid != 0 || !h.ModTime.Equal(created) {
		t.Errorf("/eventforge: %+v (want root-owned, 0755: the user may run but not replace it)", h)
	}
	if h := fs["tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v", h)
	}
	if h := fs["home/nonroot"]; h == nil || h.Uid != UID {
		t.Errorf("home: %+v", h)
	}
	if !strings.Contains(string(readFile(t, img, "etc/passwd")), "nonroot:x:65532:65532:") {
		t.Error("no nonroot user in /etc/passwd")
	}
	if string(readFile(t, img, "etc/ssl/certs/ca-certificates.crt")) != "-----BEGIN CERTIFICATE-----\n" {
		t.Error("CA bundle not copied")
	}
	for name, h := range fs {
		if h.Mode&0o6000 != 0 {
			t.Errorf("%s is setuid/setgid", name)
		}
	}
}

// TestBuildIsReproducible: the same inputs give the same digest.
func TestBuildIsReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "eventforge")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := Config{Binary: bin, CACerts: bin, Ref: "eventforge:x", Version: "x", Revision: "r", Source: "s", Created: time.Unix(1700000000, 0)}
	var digests []v1.Hash
	for range 2 {
		img, err := Build(c)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	if digests[0] != digests[1] {
		t.Errorf("digests %v differ", digests)
	}
}

// TestConfigValidateCollectsErrors: every missing field is named at once.
func TestConfigValidateCollectsErrors(t *testing.T) {
	err := Config{Ref: "Bad Ref"}.Validate()
	for _, want := range []string{"no binary", "no version", "no revision", "no source", "parse ref"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
	}
}
