package main

import "github.com/spf13/cobra"

// newSlotCmd is a placeholder until its issue lands.
func newSlotCmd() *cobra.Command {
	return &cobra.Command{Use: "slot", Short: "not built yet", Hidden: true}
}
