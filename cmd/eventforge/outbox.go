package main

import "github.com/spf13/cobra"

// newOutboxCmd is a placeholder until its issue lands.
func newOutboxCmd() *cobra.Command {
	return &cobra.Command{Use: "outbox", Short: "not built yet", Hidden: true}
}
