package cdc

import (
	"strconv"
	"strings"
)

// binaryTuplesSince is the first PostgreSQL major version whose pgoutput
// takes the binary option.
const binaryTuplesSince = 14

// pluginArgs are pgoutput's options for a server of version (its
// server_version parameter, e.g. "15.4 (Debian 15.4-1)"). Binary tuple data
// is asked for where the server has it and no column has refused it: it
// takes the text output functions (uuid, timestamptz, bytea's hex) off the
// WAL sender, the usual bottleneck of a drain; the decoder turns the values
// the outbox needs back into the same text (see package pgoutput).
func (r *Relay) pluginArgs(version string) []string {
	args := []string{
		"proto_version '1'",
		"publication_names '" + r.cfg.Publication + "'",
		"messages 'true'",
	}
	if !r.textTuples.Load() && majorVersion(version) >= binaryTuplesSince {
		args = append(args, "binary 'true'")
	}
	return args
}

// majorVersion reads the major version from a server_version parameter; 0
// when it cannot.
func majorVersion(version string) int {
	end := strings.IndexFunc(version, func(c rune) bool { return c < '0' || c > '9' })
	if end < 0 {
		end = len(version)
	}
	v, err := strconv.Atoi(version[:end])
	if err != nil {
		return 0
	}
	return v
}
