// Command leftovers drops what integration tests left on the shared local
// services (`make up`): databases and topics named as testenv.UniqueName
// names them that nothing has used for --min-age, and the eventforge
// binaries test processes built into the state folder's bin. Tests delete what they
// create at cleanup; this clears what a killed or timed-out test run left.
// `make clean-test-data` runs it, and `make test` before the tests.
//
// Imports (a test-support tool): internal/testsupport/testenv.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

func main() {
	minAge := flag.Duration("min-age", 30*time.Minute, "leave what was used more recently than this (tests running now)")
	dryRun := flag.Bool("dry-run", false, "list what would be dropped, drop nothing")
	flag.Parse()
	if err := run(context.Background(), *minAge, *dryRun); err != nil {
		fmt.Fprintln(os.Stderr, "clean-test-data:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, minAge time.Duration, dryRun bool) error {
	env, err := testenv.SharedEnv()
	if err != nil {
		return err
	}
	logDir, err := testenv.KafkaLogDir()
	if err != nil {
		return err
	}
	l, err := testenv.FindLeftovers(ctx, env, logDir, minAge)
	if err != nil {
		return err
	}
	verb := "dropped"
	if dryRun {
		verb = "would drop"
		for _, n := range l.Databases {
			fmt.Println("database", n)
		}
		for _, n := range l.Topics {
			fmt.Println("topic", n)
		}
		for _, n := range l.Binaries {
			fmt.Println("binary", n)
		}
	} else if err := l.Drop(ctx, env); err != nil {
		return err
	}
	fmt.Printf("clean-test-data: %s %d test databases, %d test topics and %d test binaries unused for %s\n",
		verb, len(l.Databases), len(l.Topics), len(l.Binaries), minAge)
	return nil
}
