package main

import "github.com/spf13/cobra"

// newWorkerCmd is a placeholder until its issue lands.
func newWorkerCmd() *cobra.Command {
	return &cobra.Command{Use: "worker", Short: "not built yet", Hidden: true}
}
