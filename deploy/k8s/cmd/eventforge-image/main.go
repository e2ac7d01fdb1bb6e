// Command eventforge-image writes EventForge's container image, built from
// scratch around a static eventforge binary, as a docker-save tarball
// (`make image`). No Docker engine, no base image, no registry.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/eventforge/eventforge/deploy/k8s/imagebuild"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "eventforge-image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var c imagebuild.Config
	var out, created string
	fs := flag.NewFlagSet("eventforge-image", flag.ContinueOnError)
	fs.StringVar(&c.Binary, "binary", "", "static eventforge binary (CGO_ENABLED=0)")
	fs.StringVar(&c.CACerts, "ca-certs", imagebuild.DefaultCACerts, "PEM CA bundle for /etc/ssl/certs/ca-certificates.crt")
	fs.StringVar(&c.Ref, "ref", "", "image name in the tarball, e.g. eventforge:v0.1.0")
	fs.StringVar(&c.Version, "version", "", "org.opencontainers.image.version (the binary's version)")
	fs.StringVar(&c.Revision, "revision", "", "org.opencontainers.image.revision (the git commit)")
	fs.StringVar(&c.Source, "source", "https://github.com/eventforge/eventforge", "org.opencontainers.image.source")
	fs.StringVar(&c.Licenses, "licenses", "NOASSERTION", "org.opencontainers.image.licenses (SPDX expression)")
	fs.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "image and file time, Unix seconds (default $SOURCE_DATE_EPOCH, else the epoch)")
	fs.StringVar(&c.Arch, "arch", "amd64", "GOARCH of the binary")
	fs.StringVar(&out, "out", "bin/eventforge-image.tar", "tarball to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if created != "" {
		sec, err := strconv.ParseInt(created, 10, 64)
		if err != nil {
			return fmt.Errorf("parse -created: %w", err)
		}
		c.Created = time.Unix(sec, 0)
	}
	img, err := imagebuild.Write(c, out)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Printf("eventforge-image: %s %s, %s, %.1f MB (user %d, entrypoint %s)\n", c.Ref, digest, out, float64(st.Size())/1e6, imagebuild.UID, imagebuild.Entrypoint)
	return nil
}
