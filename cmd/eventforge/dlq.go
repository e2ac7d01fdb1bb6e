package main

import "github.com/spf13/cobra"

// newDLQCmd is a placeholder until its issue lands.
func newDLQCmd() *cobra.Command {
	return &cobra.Command{Use: "dlq", Short: "not built yet", Hidden: true}
}
