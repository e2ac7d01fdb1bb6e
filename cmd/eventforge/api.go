package main

import "github.com/spf13/cobra"

// newAPICmd is a placeholder until its issue lands.
func newAPICmd() *cobra.Command {
	return &cobra.Command{Use: "api", Short: "not built yet", Hidden: true}
}
