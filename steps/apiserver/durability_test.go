package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const (
	killedEnv = "PODLAB_TEST_KILLED_AT_STORAGE" // the write the child narrates
	stateEnv  = "PODLAB_TEST_STATE_DIR"
)

// TestHelperKilledAtStorageLine is not a test: it is the child process of
// TestStorageLineFollowsDurability. It makes one write with a narrating
// client, prints the storage line when it comes, and SIGKILLs itself right
// after, as a learner's Ctrl-\ or the OOM killer could.
func TestHelperKilledAtStorageLine(t *testing.T) {
	write := os.Getenv(killedEnv)
	if write == "" {
		t.Skip("only runs as a child of TestStorageLineFollowsDurability")
	}
	if err := killedAtStorageLine(write, os.Getenv(stateEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(3) // the storage line never came
}

func killedAtStorageLine(write, dir string) error {
	s, err := Open(dir)
	if err != nil {
		return err
	}
	ctx := context.Background()
	quiet, err := s.ClientAs("admin")
	if err != nil {
		return err
	}
	if write != "create" {
		if _, err := quiet.Create(ctx, testPod("web")); err != nil {
			return err
		}
	}
	c, err := s.ClientAs("admin", WithPhases(func(p Phase) {
		if p.Name == PhaseStorage {
			fmt.Println(p.Summary)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}))
	if err != nil {
		return err
	}
	switch write {
	case "create":
		_, err = c.Create(ctx, testPod("web"))
	case "update":
		var obj Object
		if obj, err = quiet.Get(ctx, "pods", "default", "web"); err == nil {
			obj.SetLabels(map[string]string{"app": "web", "changed": "yes"})
			_, err = c.Update(ctx, obj)
		}
	case "delete":
		_, err = c.Delete(ctx, "pods", "default", "web", DeleteOptions{})
	default:
		err = errors.New("unknown write " + write)
	}
	return err
}

// The storage line ("created /registry/pods/default/web at revision 7") is
// a promise: a process killed right after printing it has stored what it
// said. So it must come after the write's fsync, not inside the
// transaction before it.
func TestStorageLineFollowsDurability(t *testing.T) {
	tests := []struct {
		write string
		line  string // what the storage line starts with
		check func(t *testing.T, obj Object, err error)
	}{
		{"create", "created /registry/pods/default/web at revision", func(t *testing.T, obj Object, err error) {
			if err != nil {
				t.Errorf("the pod the line said was created: %v", err)
			}
		}},
		{"update", "updated /registry/pods/default/web at revision", func(t *testing.T, obj Object, err error) {
			if err != nil || obj.GetLabels()["changed"] != "yes" {
				t.Errorf("the update the line reported is lost: labels %v, %v", labelsOf(obj), err)
			}
		}},
		{"delete", "deleted /registry/pods/default/web", func(t *testing.T, obj Object, err error) {
			if !apierrors.IsNotFound(err) {
				t.Errorf("the pod the line said was deleted is there: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.write, func(t *testing.T) {
			_, dir := testServer(t) // Init, and a server this test closes now
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperKilledAtStorageLine$")
			cmd.Env = append(os.Environ(), killedEnv+"="+tt.write, stateEnv+"="+dir)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the child was not killed at its storage line: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
			}
			if !strings.HasPrefix(out.String(), tt.line) {
				t.Fatalf("the child printed %q, want a line starting %q", out.String(), tt.line)
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			obj, err := as(t, s, "admin").Get(ctx(t), "pods", "default", "web")
			tt.check(t, obj, err)
		})
	}
}

func labelsOf(obj Object) map[string]string {
	if obj == nil {
		return nil
	}
	return obj.GetLabels()
}
