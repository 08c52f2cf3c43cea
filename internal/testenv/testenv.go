// Package testenv holds the few checks podlab's tests share: whether a test
// that needs root or a binary may run here, and where the repository is.
//
// Outside CI a missing prerequisite skips the test; with CI set it fails the
// run, so that CI never passes by skipping what it was meant to check.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// InCI reports whether the CI environment variable is set to anything but
// "" or "false".
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// Missing skips the test outside CI and fails it in CI.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("prerequisite missing in CI: "+format, args...)
	}
	t.Skipf("prerequisite missing: "+format, args...)
}

// RequireRoot needs the test to run as root (runc, cgroups, mounts).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "this test needs root (it runs runc and writes cgroups); run it as root or in CI")
	}
}

// RepoRoot is the repository's top directory, found from this file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Runc returns the runc binary the tests use: $PODLAB_RUNTIME, else the
// repository's bin/runc (what `make deps` installs), else runc on PATH.
func Runc(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PODLAB_RUNTIME"); p != "" {
		return p
	}
	if p := filepath.Join(RepoRoot(), "bin", "runc"); isExecutable(p) {
		return p
	}
	return LookPath(t, "runc")
}

// LookPath finds a binary on PATH or in the repository's bin/, or reports it
// missing.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	if p := filepath.Join(RepoRoot(), "bin", name); isExecutable(p) {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s not found in bin/ or on PATH (make deps installs it)", name)
	}
	return p
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Kubectl returns the repository's bin/kubectl, the kubectl of the lab's
// release that `make deps` builds from k8s.io/kubectl (tools/kubectl). The
// kubectl on PATH is not used: it may be another release (these machines
// have a cloud SDK's 1.32 dispatcher there).
func Kubectl(t testing.TB) string {
	t.Helper()
	p := filepath.Join(RepoRoot(), "bin", "kubectl")
	if !isExecutable(p) {
		Missing(t, "%s not found (make deps builds it from tools/kubectl)", p)
	}
	return p
}
