package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/cli.md from the commands' help")

// TestCLIReferenceIsCurrent keeps docs/cli.md equal to what --help says, so
// every command and flag is documented. Regenerate with
// go test ./cmd/eventforge -run TestCLIReferenceIsCurrent -update-docs
func TestCLIReferenceIsCurrent(t *testing.T) {
	var doc bytes.Buffer
	doc.WriteString("# Command reference\n\nGenerated from `eventforge <command> --help` by\n" +
		"`go test ./cmd/eventforge -run TestCLIReferenceIsCurrent -update-docs`; a test fails when it is out of date.\n" +
		"Every flag can also be set by its environment variable `EVENTFORGE_<FLAG>` (shown in brackets); a flag given on\n" +
		"the command line wins.\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.Runnable() {
			fmt.Fprintf(&doc, "\n## `%s`\n\n```\n%s```\n", c.CommandPath(), helpOf(c))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	const path = "../../docs/cli.md"
	if *updateDocs {
		if err := os.WriteFile(path, doc.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v (generate it with -update-docs)", path, err)
	}
	if !bytes.Equal(got, doc.Bytes()) {
		t.Fatalf("%s is out of date: run go test ./cmd/eventforge -run TestCLIReferenceIsCurrent -update-docs", path)
	}
}

func helpOf(c *cobra.Command) string {
	var b bytes.Buffer
	c.SetOut(&b)
	c.SetErr(&b)
	if err := c.Help(); err != nil {
		return err.Error()
	}
	return strings.TrimLeft(b.String(), "\n")
}
