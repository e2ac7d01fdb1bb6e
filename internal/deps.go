//go:build tools

// Package internal pins modules that later packages import, so go mod tidy
// keeps them while those packages are being written.
package internal

import (
	_ "github.com/jackc/pglogrepl"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sync/errgroup"
)
