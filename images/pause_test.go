package images

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podlab/podlab/internal/testenv"
)

func TestPause(t *testing.T) {
	testenv.LookPath(t, "gcc")
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "pause")
	if err := BuildPause(ctx, bin); err != nil {
		t.Fatal(err)
	}
	// Static: no program interpreter, so it runs in an image without libc.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: not built with -static", bin)
		}
	}
	out, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "pause.c v"+PauseVersion+"-podlab" {
		t.Errorf("pause -v = %q, %v; want %q", out, err, "pause.c v"+PauseVersion+"-podlab")
	}

	img, err := Pause(ctx, PauseOptions{Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	// As Kubernetes' build/pause/Dockerfile.
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/pause" || cf.Config.User != "65535:65535" || len(cf.Config.Cmd) != 0 {
		t.Errorf("config: Entrypoint %q User %q Cmd %q; want [/pause], 65535:65535, none", cf.Config.Entrypoint, cf.Config.User, cf.Config.Cmd)
	}
	layers := layerFiles(t, img)
	if len(layers) != 1 || len(layers[0]) != 1 || layers[0]["pause"] == nil || layers[0]["pause"].Mode != 0o755 || layers[0]["pause"].Uid != 0 {
		t.Errorf("layers hold %v, want one layer of only pause (0755, root's)", layers)
	}
}

func TestPause_Bad(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, binary, wantErr string
	}{
		{"no binary", "", "no pause binary given"},
		{"missing binary", filepath.Join(t.TempDir(), "nope"), "reading the pause binary"},
		{"not ELF", notELF, "not a Linux (ELF) executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Pause(context.Background(), PauseOptions{Binary: tt.binary})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Pause(%q) error = %v, want one containing %q", tt.binary, err, tt.wantErr)
			}
		})
	}
}
