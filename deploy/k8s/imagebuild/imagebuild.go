// Package imagebuild builds EventForge's container image without a Docker
// engine or a base image: from scratch, a layer with the files a static Go
// binary needs (a passwd and group file naming the non-root user 65532, the
// CA bundle, a world-writable /tmp and the user's home) and a layer with
// the binary, written as a docker-save tarball that `docker load`,
// `crane push`, `skopeo copy docker-archive:` and `kind load image-archive`
// read.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: the distroless "nonroot" user and group.
const (
	UID        = 65532
	UserName   = "nonroot"
	Home       = "/home/nonroot"
	Entrypoint = "/eventforge"
	// DefaultCACerts is where Debian's ca-certificates package writes the
	// bundle, and where Go's crypto/x509 looks first on Linux.
	DefaultCACerts = "/etc/ssl/certs/ca-certificates.crt"
)

// Config describes one image. Every field without a default is required.
type Config struct {
	// Binary is the path of the static eventforge binary (CGO_ENABLED=0).
	Binary string
	// CACerts is the PEM CA bundle copied to /etc/ssl/certs; default
	// DefaultCACerts.
	CACerts string
	// Ref names the image in the tarball, e.g. eventforge:v0.1.0.
	Ref string
	// Version, Revision, Source and Licenses fill the
	// org.opencontainers.image.* labels; Licenses defaults to NOASSERTION.
	Version, Revision, Source, Licenses string
	// Created is the image's and every file's time (the commit time keeps
	// builds reproducible); default the Unix epoch.
	Created time.Time
	// Arch is the GOARCH of Binary; default amd64.
	Arch string
}

func (c *Config) defaults() {
	if c.CACerts == "" {
		c.CACerts = DefaultCACerts
	}
	if c.Licenses == "" {
		c.Licenses = "NOASSERTION"
	}
	if c.Arch == "" {
		c.Arch = "amd64"
	}
	if c.Created.IsZero() {
		c.Created = time.Unix(0, 0)
	}
}

// Validate reports every missing field at once.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{{"binary", c.Binary}, {"ref", c.Ref}, {"version", c.Version}, {"revision", c.Revision}, {"source", c.Source}} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("no %s", f.name))
		}
	}
	if c.Ref != "" {
		if _, err := name.NewTag(c.Ref); err != nil {
			errs = append(errs, fmt.Errorf("parse ref: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Labels are the image's OCI annotations as config labels.
func (c Config) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "eventforge",
		"org.opencontainers.image.description": "EventForge: CDC relay PostgreSQL outbox to Kafka, inbox workers, orders API",
		"org.opencontainers.image.version":     c.Version,
		"org.opencontainers.image.revision":    c.Revision,
		"org.opencontainers.image.source":      c.Source,
		"org.opencontainers.image.licenses":    c.Licenses,
		"org.opencontainers.image.created":     c.Created.UTC().Format(time.RFC3339),
	}
}

// Build assembles the image described by c.
func Build(c Config) (v1.Image, error) {
	c.defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	base, err := baseLayer(c)
	if err != nil {
		return nil, err
	}
	bin, err := binaryLayer(c)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{CreatedBy: "eventforge-image: passwd, group, CA certificates, /tmp, home", Created: v1.Time{Time: c.Created}}},
		mutate.Addendum{Layer: bin, History: v1.History{CreatedBy: "eventforge-image: " + Entrypoint, Created: v1.Time{Time: c.Created}}})
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", c.Arch, v1.Time{Time: c.Created}
	id := strconv.Itoa(UID)
	cf.Config = v1.Config{
		User:       id + ":" + id,
		Entrypoint: []string{Entrypoint},
		Cmd:        []string{"--help"},
		WorkingDir: Home,
		Env:        []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "HOME=" + Home},
		// 8080: api run; 9090: /healthz, /readyz, /metrics (--metrics-addr).
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "9090/tcp": {}},
		Labels:       c.Labels(),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// Write builds the image and writes it as a docker-save tarball to path.
func Write(c Config, path string) (v1.Image, error) {
	img, err := Build(c)
	if err != nil {
		return nil, err
	}
	ref, err := name.NewTag(c.Ref)
	if err != nil {
		return nil, err
	}
	if err := tarball.WriteToFile(path, ref, img); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return img, nil
}

// entry is one file or directory of a layer.
type entry struct {
	name     string
	mode     int64
	uid      int
	dir      bool
	body     []byte
	bodyPath string
}

func baseLayer(c Config) (v1.Layer, error) {
	ca, err := os.ReadFile(c.CACerts)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w", err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", UserName, UID, UID, UserName, Home)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, UID)
	return layer(c.Created, []entry{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/ssl/", dir: true, mode: 0o755},
		{name: "etc/ssl/certs/", dir: true, mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: ca},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: UID},
		{name: "tmp/", dir: true, mode: 0o1777},
	})
}

func binaryLayer(c Config) (v1.Layer, error) {
	st, err := os.Stat(c.Binary)
	if err != nil {
		return nil, fmt.Errorf("stat binary: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("binary %s is not a regular file", c.Binary)
	}
	return layer(c.Created, []entry{{name: Entrypoint[1:], mode: 0o755, bodyPath: c.Binary}})
}

// layer writes entries into an uncompressed tar in memory (a few tens of
// MB at most) and makes a gzip-compressed layer of it.
func layer(mtime time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime, Format: tar.FormatPAX}
		var body io.Reader
		switch {
		case e.dir:
			hdr.Typeflag = tar.TypeDir
		case e.bodyPath != "":
			f, err := os.Open(e.bodyPath)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return nil, err
			}
			hdr.Typeflag, hdr.Size, body = tar.TypeReg, st.Size(), f
		default:
			hdr.Typeflag, hdr.Size, body = tar.TypeReg, int64(len(e.body)), bytes.NewReader(e.body)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write %s: %w", e.name, err)
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return nil, fmt.Errorf("write %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// ReadFile returns the content of path (relative, e.g. "eventforge") in the
// flattened file system of img.
func ReadFile(img v1.Image, path string) ([]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w", path, os.ErrNotExist)
		}
		if err != nil {
			return nil, err
		}
		if h.Name == path {
			return io.ReadAll(tr)
		}
	}
}

// ExtractBinary writes the entrypoint of the image tarball at tarPath to
// dst (mode 0755), for running it outside a container.
func ExtractBinary(tarPath, dst string) error {
	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		return err
	}
	b, err := ReadFile(img, Entrypoint[1:])
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
