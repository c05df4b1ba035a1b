package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// addWideFlags gives a command kubectl's table switch: the default view fits
// a 120-column terminal, and -o wide (or --wide) shows every column.
// Machine-readable output stays with --json.
func addWideFlags(cmd *cobra.Command, wide *bool) {
	var output string
	fl := cmd.Flags()
	fl.StringVarP(&output, "output", "o", "", `table view: "wide" shows every column`)
	fl.BoolVar(wide, "wide", false, "show every column of the tables (same as -o wide)")
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		switch output {
		case "":
		case "wide":
			*wide = true
		default:
			return usageError{fmt.Errorf("-o %q: want wide (the default view needs no flag; JSON is --json)", output)}
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}
