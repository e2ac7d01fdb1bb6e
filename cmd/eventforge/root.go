package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix names the environment twin of every flag: --pg-url is
// EVENTFORGE_PG_URL. A flag given on the command line beats its variable.
const envPrefix = "EVENTFORGE_"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "eventforge",
		Short:         "Relay outbox events from PostgreSQL to Kafka and apply them exactly once in effect",
		Long:          "EventForge reads the outbox table through a logical replication slot, produces each committed event to Kafka\nwith an idempotent producer, and applies events downstream with the inbox pattern.\n\nEvery flag can also be set by an environment variable EVENTFORGE_<FLAG> (upper case, dashes to underscores);\na flag given on the command line wins.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd)
		},
	}
	root.AddCommand(
		newVersionCmd(),
		newMigrateCmd(),
		newCDCCmd(),
		newWorkerCmd(),
		newAPICmd(),
		newSlotCmd(),
		newDLQCmd(),
		newOutboxCmd(),
		newBenchCmd(),
		newConsoleCmd(),
	)
	return root
}

// applyEnv fills every flag the user did not set from its EVENTFORGE_ twin.
func applyEnv(cmd *cobra.Command) error {
	var firstErr error
	set := func(f *pflag.Flag) {
		if f.Changed || firstErr != nil {
			return
		}
		name := envName(f.Name)
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			firstErr = fmt.Errorf("invalid %s: %w", name, err)
			return
		}
		f.Changed = true
	}
	cmd.Flags().VisitAll(set)
	cmd.InheritedFlags().VisitAll(set)
	return firstErr
}

func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envAnnotatedUsage makes --help show each flag's variable.
func annotateEnv(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(f.Usage, envPrefix) {
			f.Usage += " [$" + envName(f.Name) + "]"
		}
	})
}

// oneLine flattens an error to the single line the contract promises on stderr.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// logFlags are the logging flags of every long-running command.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("invalid --log-level %q", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("invalid --log-format %q: want text or json", l.format)
	}
}
