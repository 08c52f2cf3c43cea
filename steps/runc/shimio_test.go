package runc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What the shim's socket answers to requests it cannot serve: each gets an
// answer that says why, and the connection closes.
func TestShimIO_BadRequests(t *testing.T) {
	for _, tc := range []struct {
		name  string
		line  string
		ended bool // the container's output has ended
		want  string
	}{
		{name: "not JSON", line: "reopen the log please\n", want: "reading the request"},
		{name: "unknown op", line: `{"op":"checkpoint"}` + "\n", want: `unknown request "checkpoint"`},
		{name: "no op", line: `{}` + "\n", want: `unknown request ""`},
		{name: "attach after the output ended", line: `{"op":"attach","stdout":true}` + "\n", ended: true, want: "output has ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &shimIO{cw: &criWriter{w: &bytes.Buffer{}, now: time.Now}, clients: map[*attachClient]bool{}}
			if tc.ended {
				s.end()
			}
			client, server := net.Pipe()
			go s.handle(server)
			_ = client.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := client.Write([]byte(tc.line)); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(client).ReadBytes('\n')
			if err != nil {
				t.Fatal(err)
			}
			var a shimAnswer
			if err := json.Unmarshal(line, &a); err != nil || !strings.Contains(a.Error, tc.want) {
				t.Fatalf("answer %q (%v), want an error with %q", line, err, tc.want)
			}
			if _, err := client.Read(make([]byte, 1)); err == nil {
				t.Error("the connection stayed open after the error")
			}
		})
	}
}

// A frame longer than maxFrame is refused before anything is allocated.
func TestReadFrame_TooLong(t *testing.T) {
	var b bytes.Buffer
	if err := writeFrame(&b, frameStdin, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	kind, p, err := readFrame(&b)
	if err != nil || kind != frameStdin || string(p) != "ok" {
		t.Fatalf("readFrame = %d %q %v", kind, p, err)
	}
	b.Reset()
	b.Write([]byte{frameStdin, 0xff, 0xff, 0xff, 0xff})
	if _, _, err := readFrame(&b); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("readFrame of a 4 GiB frame: %v, want refused", err)
	}
}

// ReopenLog and Attach of a container whose shim is gone (it exited, or
// it ran in the foreground) say so with ErrNoShim; of an unknown one,
// ErrContainerNotFound.
func TestRuntime_ShimGone(t *testing.T) {
	r := &Runtime{Binary: "runc", StateDir: t.TempDir()}
	if err := os.MkdirAll(r.ContainerDir("gone"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.ContainerDir("gone"), shimSocketName), nil, 0o600); err != nil {
		t.Fatal(err) // a socket file nobody listens on: a plain file
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		id   string
		want error
	}{
		{"shim gone", "gone", ErrNoShim},
		{"unknown container", "never-made", ErrContainerNotFound},
		{"bad id", "../gone", ErrInvalidID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := r.ReopenLog(ctx, tc.id); !errors.Is(err, tc.want) {
				t.Errorf("ReopenLog(%q) = %v, want %v", tc.id, err, tc.want)
			}
			if err := r.Attach(ctx, tc.id, AttachOptions{IO: IO{Stdout: &bytes.Buffer{}}}); !errors.Is(err, tc.want) {
				t.Errorf("Attach(%q) = %v, want %v", tc.id, err, tc.want)
			}
		})
	}
}
