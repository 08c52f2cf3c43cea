package cliargs

import (
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func testApp() *cli.App {
	return &cli.App{
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "state-dir"},
			&cli.BoolFlag{Name: "debug"},
		},
		Commands: []*cli.Command{
			{Name: "unpack", Flags: []cli.Flag{
				&cli.StringFlag{Name: "bundle", Aliases: []string{"b"}},
				&cli.BoolFlag{Name: "force"},
			}},
			{Name: "runc", Subcommands: []*cli.Command{
				{Name: "exec", Flags: []cli.Flag{&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}}}},
			}},
		},
	}
}

func TestFlagsFirst(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"flags already first", "podlab unpack --bundle b nginx", "podlab unpack --bundle b nginx"},
		{"flag after argument", "podlab unpack nginx --bundle b", "podlab unpack --bundle b nginx"},
		{"flag with equals", "podlab unpack nginx --bundle=b --force", "podlab unpack --bundle=b --force nginx"},
		{"short alias", "podlab unpack nginx -b b", "podlab unpack -b b nginx"},
		{"bool flag does not eat the argument", "podlab unpack --force nginx", "podlab unpack --force nginx"},
		{"global flag after subcommand", "podlab unpack nginx --state-dir /s", "podlab --state-dir /s unpack nginx"},
		{"nested subcommand", "podlab runc exec web --tty", "podlab runc exec --tty web"},
		{"everything after -- stays", "podlab runc exec web -t -- sh -c --bundle", "podlab runc exec -t web -- sh -c --bundle"},
		{"argument that looks like a command", "podlab unpack runc", "podlab unpack runc"},
		{"no arguments", "podlab", "podlab"},
		{"value flag at the end", "podlab unpack nginx --bundle", "podlab unpack --bundle= nginx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FlagsFirst(testApp(), strings.Fields(tt.in))
			if want := strings.Fields(tt.want); !reflect.DeepEqual(got, want) {
				t.Errorf("FlagsFirst(%q)\n got %q\nwant %q", tt.in, got, want)
			}
		})
	}
}
