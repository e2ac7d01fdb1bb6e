package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/eventforge/eventforge/internal/shared/secret"
)

// secretFileFlags is --strict-file-modes: what a command does with a secret
// file (token, password, private key) that group or others may read.
type secretFileFlags struct{ strict bool }

func (s *secretFileFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&s.strict, "strict-file-modes", false, "refuse secret files (tokens, passwords, private keys) that group or others may read, instead of warning")
}

// check warns about, or with --strict-file-modes refuses, each named secret
// file (flag name → path) that is not private to its owner.
func (s secretFileFlags) check(log *slog.Logger, files map[string]string) error {
	return secret.FileChecker{Strict: s.strict, Log: log}.Check(files)
}

// resolveToken returns the bearer token from its flag or, when file is set,
// from the file; what names it in errors, flag is the value's flag name.
func resolveToken(value, file, what, flag string) (secret.Token, error) {
	switch {
	case value != "" && file != "":
		return "", fmt.Errorf("set %s or %s-file, not both", flag, flag)
	case file != "":
		return secret.ReadTokenFile(file, what)
	default:
		return secret.Token(value), nil
	}
}

// warnExposed logs the one line that says a listener without authentication
// is reachable beyond this machine.
func warnExposed(log *slog.Logger, what, addr, flag string) {
	if secret.LoopbackOnly(addr) {
		return
	}
	log.Warn(what+" serves without authentication beyond loopback: anyone who reaches the address can use it; set "+flag, "addr", addr)
}
