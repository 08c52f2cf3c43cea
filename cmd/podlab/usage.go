package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// kubectlUsage makes every command of app answer a usage error as kubectl
// does: one line saying what was wrong, and where the help is,
//
//	podlab: unknown flag: --bogus
//	See 'podlab get --help' for usage.
//
// instead of urfave/cli's "Incorrect Usage:" followed by the whole help
// (and then the error again, from main). And every command's --help lists
// the global options that apply to it too (--as, -v, --state-dir...), under
// GLOBAL OPTIONS, as kubectl's help ends with "kubectl options".
func kubectlUsage(app *cli.App) {
	global := globalOptions(app.Flags)
	app.OnUsageError = func(c *cli.Context, err error, _ bool) error {
		return usageError(app.Name, err)
	}
	// Some commands are package-level values, to which urfave/cli adds its
	// help subcommand on every run: leave those alone, and visit each
	// command once.
	seen := map[*cli.Command]bool{}
	var walk func(cmds []*cli.Command, parent string)
	walk = func(cmds []*cli.Command, parent string) {
		for _, cmd := range cmds {
			if cmd.Name == "help" || seen[cmd] {
				continue
			}
			seen[cmd] = true
			name := parent + " " + cmd.Name
			cmd.OnUsageError = func(c *cli.Context, err error, _ bool) error {
				return usageError(name, err)
			}
			if !hasSubcommands(cmd) && cmd.CustomHelpTemplate == "" {
				cmd.CustomHelpTemplate = cli.CommandHelpTemplate + global
			}
			walk(cmd.Subcommands, name)
		}
	}
	walk(app.Commands, app.Name)
}

// usageError is kubectl's text for a flag it could not parse (pflag's
// words; Go's flag package, under urfave/cli, says it differently).
func usageError(command string, err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: -"):
		name := strings.TrimPrefix(msg, "flag provided but not defined: -")
		if len(name) == 1 {
			msg = fmt.Sprintf("unknown shorthand flag: '%s' in -%s", name, name)
		} else {
			msg = "unknown flag: --" + name
		}
	case strings.HasPrefix(msg, "invalid value "):
		// invalid value "abc" for flag -replicas: parse error
		var value, name, why string
		if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
			if q, after, ok := cutQuoted(rest); ok {
				value = q
				if n, w, ok := strings.Cut(strings.TrimPrefix(after, " for flag -"), ": "); ok {
					name, why = n, w
				}
			}
		}
		if name != "" {
			dashes := "--"
			if len(name) == 1 {
				dashes = "-"
			}
			msg = fmt.Sprintf("invalid argument %q for %q flag: %s", value, dashes+name, why)
		}
	}
	return fmt.Errorf("%s\nSee '%s --help' for usage.", msg, command)
}

// cutQuoted splits `"abc" rest` into abc and ` rest`.
func cutQuoted(s string) (string, string, bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", s, false
	}
	end := strings.Index(s[1:], `"`)
	if end < 0 {
		return "", s, false
	}
	return s[1 : end+1], s[end+2:], true
}

// globalOptions renders app's own flags as a help section, aligned as
// urfave/cli aligns OPTIONS.
func globalOptions(flags []cli.Flag) string {
	type row struct{ left, right string }
	var rows []row
	width := 0
	for _, f := range flags {
		left, right, _ := strings.Cut(cli.FlagStringer(f), "\t")
		rows = append(rows, row{left, right})
		width = max(width, len(left))
	}
	var b strings.Builder
	b.WriteString("\nGLOBAL OPTIONS (of every command):\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "   %-*s  %s\n", width, r.left, r.right)
	}
	return b.String()
}

// hasSubcommands says whether cmd has subcommands of its own (not counting
// the help command urfave/cli adds).
func hasSubcommands(cmd *cli.Command) bool {
	for _, s := range cmd.Subcommands {
		if s.Name != "help" {
			return true
		}
	}
	return false
}
