// Command eventforge moves outbox events from PostgreSQL to Kafka and applies
// them downstream exactly once in effect. See README.md.
//
// Imports (floor: program): any package of the module except test support.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/eventforge/eventforge/internal/shared/failpoint"
)

func main() {
	if err := failpoint.Setup(os.Getenv(failpoint.EnvVar)); err != nil {
		fmt.Fprintln(os.Stderr, "eventforge:", oneLine(err))
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "eventforge:", oneLine(err))
		os.Exit(1)
	}
}
