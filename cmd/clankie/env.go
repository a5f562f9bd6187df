package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/clankie/clankie/config"
)

func newEnvCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "env",
		Short:   "List every environment variable clankie reads",
		Example: "  clankie env",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "VARIABLE\tDEFAULT\tSECRET\tMEANING")
			for _, v := range config.All() {
				def := v.Default
				if def == "" {
					def = "-"
				}
				secret := "no"
				if v.Secret {
					secret = "yes"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", v.Name, def, secret, v.Help)
			}
			return w.Flush()
		},
	}
}
