package main

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/testenv"
	"github.com/podlab/podlab/steps/statedir"
)

// TestUsage_BadFlags: a flag podlab cannot parse is one error, in
// kubectl's words, with where the help is; the help itself is not dumped.
func TestUsage_BadFlags(t *testing.T) {
	state := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"get", "pods", "--bogus"}, "unknown flag: --bogus\nSee 'podlab get --help' for usage."},
		{"unknown shorthand", []string{"get", "pods", "-z"}, "unknown shorthand flag: 'z' in -z\nSee 'podlab get --help' for usage."},
		{"a subcommand's", []string{"auth", "can-i", "--bogus", "get", "pods"}, "unknown flag: --bogus\nSee 'podlab auth can-i --help' for usage."},
		{"a global one", []string{"--bogus", "get", "pods"}, "unknown flag: --bogus\nSee 'podlab --help' for usage."},
		{"not a number", []string{"scale", "deployment/web", "--replicas", "abc"}, `invalid argument "abc" for "--replicas" flag: parse error` + "\nSee 'podlab scale --help' for usage."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := podlab(t, state, tc.args...)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if out != "" || errOut != "" {
				t.Errorf("printed besides the error (the help, or the error twice):\n%s%s", out, errOut)
			}
		})
	}
}

// leafCommands is every command without subcommands, by its full name.
func leafCommands(cmds []*cli.Command, parent []string) [][]string {
	var out [][]string
	for _, c := range cmds {
		if c.Name == "help" {
			continue
		}
		name := append(append([]string(nil), parent...), c.Name)
		if !hasSubcommands(c) {
			out = append(out, name)
		}
		out = append(out, leafCommands(c.Subcommands, name)...)
	}
	return out
}

// TestUsage_Help: every command's help lists the global options that apply
// to it too (--as, -v), and no flag says its default twice.
func TestUsage_Help(t *testing.T) {
	state := t.TempDir()
	app := newApp(nil, nil, nil)
	twice := regexp.MustCompile(`\(default: [^)]*\).*\(default: `)
	for _, cmd := range leafCommands(app.Commands, nil) {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			out, _, err := podlab(t, state, append(cmd, "--help")...)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"GLOBAL OPTIONS", "--as value", "-v, --verbose", "--state-dir value"} {
				if !strings.Contains(out, want) {
					t.Errorf("podlab %s --help has no %q", strings.Join(cmd, " "), want)
				}
			}
			for _, l := range strings.Split(out, "\n") {
				if twice.MatchString(l) {
					t.Errorf("two defaults: %s", l)
				}
			}
		})
	}
}

// TestAuthCanI_UnknownVerb: podlab auth can-i warns of a verb Kubernetes
// does not know exactly as real kubectl v1.37 does against the same API
// server, then answers as it (RBAC allows any verb to "*").
func TestAuthCanI_UnknownVerb(t *testing.T) {
	kubectl := testenv.Kubectl(t)
	state := testenv.StateDir(t)
	port := freePort(t)
	mustPodlab(t, state, "init", "--apiserver-port", strconv.Itoa(port))
	srv, _ := startAPIServer(t, state, port)
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})
	cmd := exec.Command(kubectl, "--kubeconfig", statedir.Layout{Dir: state}.Kubeconfig("admin"), "auth", "can-i", "fly", "pods")
	var kout, kerr strings.Builder
	cmd.Stdout, cmd.Stderr = &kout, &kerr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl auth can-i fly pods: %v\n%s", err, kerr.String())
	}
	out, errOut, err := podlab(t, state, "auth", "can-i", "fly", "pods")
	if err != nil {
		t.Fatal(err)
	}
	if errOut != kerr.String() {
		t.Errorf("podlab's warning %q, kubectl's %q", errOut, kerr.String())
	}
	if strings.TrimSpace(kout.String()) != "yes" || !strings.HasPrefix(out, "yes\n") {
		t.Errorf("answers: kubectl %q, podlab %q", kout.String(), out)
	}
	// a known verb: no warning
	if _, errOut, _ := podlab(t, state, "auth", "can-i", "get", "pods"); errOut != "" {
		t.Errorf("can-i get pods warned: %q", errOut)
	}
}
