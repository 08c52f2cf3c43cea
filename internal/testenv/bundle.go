package testenv

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// AppBundle makes an OCI bundle in a temporary directory whose rootfs holds
// only /app, a copy of the static binary app, run as `/app ARGS...`: the
// config.json of `runc spec` with no terminal, PATH=/, no ambient or
// inheritable capabilities and the hostname id, then changed by edit (nil
// for none). It returns the bundle's directory.
func AppBundle(t testing.TB, app, id string, edit func(*specs.Spec), args ...string) string {
	t.Helper()
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "app"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(Runc(t), "spec", "--bundle", dir).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	config := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	s.Process.Terminal = false
	s.Process.Args = append([]string{"/app"}, args...)
	s.Process.Env = []string{"PATH=/"}
	s.Process.Capabilities.Ambient = nil
	s.Process.Capabilities.Inheritable = nil
	s.Hostname = id
	if edit != nil {
		edit(&s)
	}
	if raw, err = json.MarshalIndent(&s, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
