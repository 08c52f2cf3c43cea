package main

import (
	"io"
	"strings"
	"testing"
)

func TestRun_Bad(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no --out", nil, "usage"},
		{"an argument", []string{"--out", t.TempDir(), "extra"}, "usage"},
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(tt.args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("run(%q) error = %v, want one containing %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

func TestHuman(t *testing.T) {
	for n, want := range map[int64]string{100: "100 B", 2048: "2.0 KiB", 3 << 20: "3.0 MiB"} {
		if got := human(n); got != want {
			t.Errorf("human(%d) = %q, want %q", n, got, want)
		}
	}
}
