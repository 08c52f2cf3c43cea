package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests that need a second process re-run this test binary as a child:
// TestHelperProcess does what the environment says, instead of a test.
const (
	helperEnv = "PODLAB_STORE_HELPER" // the mode: script, forever, busy, stamps
	pathEnv   = "PODLAB_STORE_PATH"
	argEnv    = "PODLAB_STORE_ARG"
)

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("only runs as a child of another test")
	}
	if err := runHelper(mode, os.Getenv(pathEnv), os.Getenv(argEnv), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runHelper(mode, path, arg string, out io.Writer) error {
	s, err := Open(path)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	switch mode {
	case "script": // run writeScript(arg), print the last revision
		n, _ := strconv.Atoi(arg)
		var rev int64
		for _, step := range writeScript(n) {
			if rev, err = s.Update(ctx, step.fn); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, rev)
	case "forever": // create keys under arg until killed, print "REV KEY" once acknowledged
		for i := 0; ; i++ {
			key := fmt.Sprintf("%s/%d", arg, i)
			rev, err := s.Update(ctx, func(tx *Tx) error {
				_, err := tx.Create(key, []byte(strings.Repeat("x", 512)))
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%d %s\n", rev, key)
		}
	case "concurrent": // 8 writers create two keys per write under arg until killed, print "REV KEY/a" once acknowledged
		var mu sync.Mutex
		errs := make(chan error, 8)
		for w := range 8 {
			go func() {
				for i := 0; ; i++ {
					key := fmt.Sprintf("%s/%d/%d", arg, w, i)
					rev, err := s.Update(ctx, func(tx *Tx) error {
						for _, half := range []string{"/a", "/b"} {
							if _, err := tx.Create(key+half, []byte(strings.Repeat("x", 512))); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					fmt.Fprintf(out, "%d %s/a\n", rev, key)
					mu.Unlock()
				}
			}()
		}
		return <-errs
	case "busy": // write back to back for arg (a duration), print "started" first
		d, err := time.ParseDuration(arg)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "started")
		for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
			if _, err := s.Update(ctx, func(tx *Tx) error {
				_, err := tx.Create(fmt.Sprintf("/busy/%d", i), []byte("v"))
				return err
			}); err != nil {
				return err
			}
		}
	case "stamps": // arg "N GAP": create N keys whose values are the write's UnixNano
		f := strings.Fields(arg)
		if len(f) != 2 {
			return errors.New("stamps needs N GAP")
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			return err
		}
		gap, err := time.ParseDuration(f[1])
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if _, err := s.Update(ctx, func(tx *Tx) error {
				_, err := tx.Create(fmt.Sprintf("/stamps/%d", i), []byte(strconv.FormatInt(time.Now().UnixNano(), 10)))
				return err
			}); err != nil {
				return err
			}
			time.Sleep(gap)
		}
	default:
		return errors.New("unknown mode " + mode)
	}
	return nil
}

// helper starts this test binary as a child in mode, on the store at path.
// Its stdout is returned; the test waits for it at cleanup.
func helper(t testing.TB, mode, path, arg string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, pathEnv+"="+path, argEnv+"="+arg)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, bufio.NewScanner(out)
}

// scriptStep is one transaction of writeScript and the events it must make.
type scriptStep struct {
	fn   func(tx *Tx) error
	want []Event // Type, KV.Key and KV.Value only
}

// writeScript creates n pods, replaces every third, deletes every fifth,
// then creates two keys in one transaction: every kind of event, and one
// revision with two events.
func writeScript(n int) []scriptStep {
	key := func(i int) string { return fmt.Sprintf("/registry/pods/default/p%04d", i) }
	var steps []scriptStep
	write := func(typ EventType, k, v string) scriptStep {
		return scriptStep{
			fn: func(tx *Tx) error {
				var err error
				switch typ {
				case Added:
					_, err = tx.Create(k, []byte(v))
				case Modified:
					_, err = tx.Put(k, []byte(v), 0)
				case Deleted:
					_, err = tx.Delete(k, 0)
				}
				return err
			},
			want: []Event{{Type: typ, KV: KV{Key: k, Value: []byte(v)}}},
		}
	}
	for i := 0; i < n; i++ {
		steps = append(steps, write(Added, key(i), fmt.Sprintf(`{"n":%d}`, i)))
	}
	for i := 0; i < n; i += 3 {
		steps = append(steps, write(Modified, key(i), fmt.Sprintf(`{"n":%d,"again":true}`, i)))
	}
	for i := 0; i < n; i += 5 {
		v := fmt.Sprintf(`{"n":%d}`, i)
		if i%3 == 0 {
			v = fmt.Sprintf(`{"n":%d,"again":true}`, i)
		}
		steps = append(steps, write(Deleted, key(i), v))
	}
	a, b := write(Added, "/registry/pods/other/x", "x"), write(Added, "/registry/pods/other/y", "y")
	steps = append(steps, scriptStep{
		fn: func(tx *Tx) error {
			if err := a.fn(tx); err != nil {
				return err
			}
			return b.fn(tx)
		},
		want: append(a.want, b.want...),
	})
	return steps
}

// tempStore opens a new store in a test directory.
func tempStore(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	path := Path(t.TempDir())
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// diskDir is a directory on the real disk (not tmpfs), for fsync timings.
func diskDir(b testing.TB) string {
	b.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "podlab-store-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "store.db")
}
