package runc_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/podlab/podlab/steps/runc"
)

// ShimCommand starts shims from podlab-runc when it sits beside the
// program (or beside the file a symlink to the program names), else from
// the program itself.
func TestShimCommand(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) (exe string)
		want  func(dir, exe string) []string
	}{
		{
			name: "podlab-runc beside podlab",
			setup: func(t *testing.T, dir string) string {
				write(t, filepath.Join(dir, runc.SmallBinary), 0o755)
				return write(t, filepath.Join(dir, "podlab"), 0o755)
			},
			want: func(dir, _ string) []string { return []string{filepath.Join(dir, runc.SmallBinary), "shim"} },
		},
		{
			name:  "no podlab-runc",
			setup: func(t *testing.T, dir string) string { return write(t, filepath.Join(dir, "podlab"), 0o755) },
			want:  func(_, exe string) []string { return []string{exe, "runc", "shim"} },
		},
		{
			name: "podlab-runc not executable",
			setup: func(t *testing.T, dir string) string {
				write(t, filepath.Join(dir, runc.SmallBinary), 0o644)
				return write(t, filepath.Join(dir, "podlab"), 0o755)
			},
			want: func(_, exe string) []string { return []string{exe, "runc", "shim"} },
		},
		{
			name: "podlab-runc a directory",
			setup: func(t *testing.T, dir string) string {
				if err := os.Mkdir(filepath.Join(dir, runc.SmallBinary), 0o755); err != nil {
					t.Fatal(err)
				}
				return write(t, filepath.Join(dir, "podlab"), 0o755)
			},
			want: func(_, exe string) []string { return []string{exe, "runc", "shim"} },
		},
		{
			name: "podlab a symlink into bin/",
			setup: func(t *testing.T, dir string) string {
				bin := filepath.Join(dir, "bin")
				if err := os.Mkdir(bin, 0o755); err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(bin, runc.SmallBinary), 0o755)
				real := write(t, filepath.Join(bin, "podlab"), 0o755)
				link := filepath.Join(dir, "podlab")
				if err := os.Symlink(real, link); err != nil {
					t.Fatal(err)
				}
				return link
			},
			want: func(dir, _ string) []string { return []string{filepath.Join(dir, "bin", runc.SmallBinary), "shim"} },
		},
		{
			name:  "podlab missing",
			setup: func(t *testing.T, dir string) string { return filepath.Join(dir, "podlab") },
			want:  func(_, exe string) []string { return []string{exe, "runc", "shim"} },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			exe := tc.setup(t, dir)
			if got, want := runc.ShimCommand(exe), tc.want(dir, exe); !slices.Equal(got, want) {
				t.Errorf("ShimCommand(%s) = %q, want %q", exe, got, want)
			}
		})
	}
}

func write(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/true\n"), mode); err != nil {
		t.Fatal(err)
	}
	return path
}
