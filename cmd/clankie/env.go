package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/clankie/clankie/config"
)

func newEnvCommand() *cobra.Command {
	var markdown bool
	cmd := &cobra.Command{
		Use:   "env",
		Short: "List every environment variable clankie reads",
		Long: `List every environment variable any clankie process reads: its name,
whether it is set in this environment (yes, empty or no; never its value),
its default, whether it is a secret (never printed or logged), and what it
does.
The README's configuration table is this command's --markdown output.`,
		Example: "  clankie env\n  clankie env --markdown",
		Args:    argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if markdown {
				_, err := io.WriteString(cmd.OutOrStdout(), envMarkdown())
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "VARIABLE\tSET\tDEFAULT\tSECRET\tMEANING")
			for _, v := range config.All() {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", v.Name, isSet(v.Name), orDash(v.Default), yesNo(v.Secret), v.Help)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print a Markdown table (the README's configuration table)")
	return cmd
}

// envMarkdown is the README's configuration table.
func envMarkdown() string {
	var b strings.Builder
	b.WriteString("| variable | default | secret | meaning |\n| --- | --- | --- | --- |\n")
	for _, v := range config.All() {
		def := "—"
		if v.Default != "" {
			def = "`" + v.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, def, yesNo(v.Secret), strings.ReplaceAll(v.Help, "|", "\\|"))
	}
	return b.String()
}

// isSet says whether a variable is set in this environment: "yes", "empty"
// (set to nothing, which counts as unset) or "no". Never its value: many
// are secrets.
func isSet(name string) string {
	v, ok := os.LookupEnv(name)
	switch {
	case !ok:
		return "no"
	case v == "":
		return "empty"
	}
	return "yes"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
