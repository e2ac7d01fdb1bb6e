package main

import "github.com/spf13/cobra"

// newCDCCmd is a placeholder until its issue lands.
func newCDCCmd() *cobra.Command {
	return &cobra.Command{Use: "cdc", Short: "not built yet", Hidden: true}
}
