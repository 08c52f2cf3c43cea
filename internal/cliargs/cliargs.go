// Package cliargs lets podlab accept flags after positional arguments, as
// kubectl does ("podlab unpack nginx --bundle DIR"), on top of urfave/cli/v2,
// which stops parsing flags at the first positional argument.
//
// FlagsFirst rewrites the argument list before the app parses it: at every
// command level, flags move ahead of the positional arguments, and a flag that
// only an outer level defines (a global flag such as --state-dir given after
// the subcommand) moves to that level. Everything after "--" is left as it is.
package cliargs

import (
	"strings"

	"github.com/urfave/cli/v2"
)

type level struct {
	flags    []cli.Flag
	commands []*cli.Command
	name     string   // the command token that opened this level ("" for the app)
	out      []string // flags for this level, in the order given
}

// FlagsFirst returns args (args[0] is the program name) reordered so that
// urfave/cli/v2 sees every flag before the positional arguments.
func FlagsFirst(app *cli.App, args []string) []string {
	if len(args) == 0 {
		return args
	}
	levels := []*level{{flags: app.Flags, commands: app.Commands}}
	var positional []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		cur := levels[len(levels)-1]
		switch {
		case a == "--":
			positional = append(positional, args[i:]...)
			i = len(args)
		case len(a) > 1 && a[0] == '-':
			name := strings.TrimLeft(a, "-")
			hasValue := strings.Contains(name, "=")
			name, _, _ = strings.Cut(name, "=")
			target, takesValue := cur, false
			for j := len(levels) - 1; j >= 0; j-- {
				if f := find(levels[j].flags, name); f != nil {
					target, takesValue = levels[j], flagTakesValue(f)
					break
				}
			}
			switch {
			case !takesValue || hasValue:
				target.out = append(target.out, a)
			case i+1 < len(args):
				target.out = append(target.out, a, args[i+1])
				i++
			default: // a value flag given last, with no value: keep it empty, never take an argument as its value
				target.out = append(target.out, a+"=")
			}
		default:
			if len(positional) == 0 {
				if cmd := findCommand(cur.commands, a); cmd != nil {
					levels = append(levels, &level{flags: cmd.Flags, commands: cmd.Subcommands, name: a})
					continue
				}
			}
			positional = append(positional, a)
		}
	}
	out := []string{args[0]}
	for _, l := range levels {
		if l.name != "" {
			out = append(out, l.name)
		}
		out = append(out, l.out...)
	}
	return append(out, positional...)
}

func find(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

func flagTakesValue(f cli.Flag) bool {
	if d, ok := f.(cli.DocGenerationFlag); ok {
		return d.TakesValue()
	}
	return false
}
