package lessons_test

// The runner of lessons_test.go: every sh block of every lesson, in order,
// in one bash session, each block's output told apart by marker lines.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podlab/podlab/steps/lesson"

	"github.com/podlab/podlab/internal/testenv"
)

// session runs lessons' sh blocks in one bash process.
type session struct {
	Bash    string        // the bash binary
	Dir     string        // the working directory; the block files go in Dir/.blocks
	Env     []string      // the environment of bash
	Timeout time.Duration // per block
	// Grace is how long leftover processes may hold the output open after
	// bash exited, before the session kills its process group.
	Grace time.Duration
	// Probe, if set, gives shell code to run before the first block of
	// lesson next ("" for none): a look at the state as the lessons before
	// left it, on behalf of lesson of (next, or a later one). Its output
	// and exit status are recorded as a blockRun of lesson of with Probe
	// set; unlike a block's, its failure does not stop the session.
	Probe func(next *lesson.Lesson) (of *lesson.Lesson, code string)
}

// blockRun is what happened to one Run block.
type blockRun struct {
	Lesson   *lesson.Lesson
	Block    *lesson.Block
	Output   string
	Started  bool
	Finished bool // reached its end: every command succeeded
	ExitCode int  // set when the session stopped inside this block; a probe's exit status
	TimedOut bool
	Took     time.Duration
	// Probe: this is not a block of the lesson but what session.Probe ran
	// before its first block.
	Probe bool
}

// Failed reports whether the block started and did not finish.
func (r *blockRun) Failed() bool { return r.Started && !r.Finished }

// markerPrefix starts the lines the session prints between blocks, with a
// nonce so that no lesson's output can forge one.
const markerPrefix = "@@podlab-lesson@@"

// run runs every Run block of lessons, in order, in one `bash -e`, and
// returns one blockRun per block. Variables and the working directory
// carry over from block to block; each block's stdin is /dev/null; stdout
// and stderr go to one pipe, so their lines keep their order. A failing
// command stops the session (set -e), as does a block that runs longer than
// Timeout. When bash exits, its EXIT trap kills the background jobs the
// lessons left, and the session kills what remains of its process group.
func (s session) run(ctx context.Context, lessons []*lesson.Lesson) ([]*blockRun, error) {
	var runs []*blockRun
	for _, l := range lessons {
		if s.Probe != nil {
			if of, code := s.Probe(l); code != "" {
				runs = append(runs, &blockRun{Lesson: of, Block: &lesson.Block{Kind: lesson.Run, Info: "sh", Code: code}, Probe: true})
			}
		}
		for _, b := range l.Runs() {
			runs = append(runs, &blockRun{Lesson: l, Block: b})
		}
	}
	nonce := make([]byte, 6)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	marker := markerPrefix + hex.EncodeToString(nonce)
	script, err := s.writeScript(runs, marker)
	if err != nil {
		return nil, err
	}

	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	cmd := exec.Command(s.Bash, "--noprofile", "--norc", "-e", script)
	cmd.Dir, cmd.Env = s.Dir, s.Env
	cmd.Stdout, cmd.Stderr = wr, wr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		wr.Close()
		return nil, fmt.Errorf("starting bash: %w", err)
	}
	wr.Close()
	killGroup := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	exited := (<-chan struct{})(done)

	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		br := bufio.NewReader(rd)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				return
			}
		}
	}()

	var (
		cur     = -1
		began   time.Time
		output  strings.Builder
		timer   = time.NewTimer(s.Timeout)
		grace   <-chan time.Time
		exitEOF <-chan time.Time
	)
	defer timer.Stop()
	// finish records the current block's output, once.
	finish := func() {
		if cur >= 0 {
			runs[cur].Output = strings.TrimRight(output.String(), "\n")
			runs[cur].Took = time.Since(began)
		}
		cur = -1
		output.Reset()
	}
loop:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			rest, isMarker := strings.CutPrefix(line, marker+" ")
			if !isMarker {
				if cur >= 0 {
					output.WriteString(line)
					output.WriteByte('\n')
				}
				continue
			}
			what, arg, _ := strings.Cut(rest, " ")
			n, _ := strconv.Atoi(arg)
			switch what {
			case "begin":
				finish()
				cur, began = n, time.Now()
				runs[cur].Started = true
				timer.Reset(s.Timeout)
			case "end":
				runs[n].Finished = true
				finish()
			case "probed":
				// "probed N STATUS": the probe ran to its end, with STATUS.
				num, status, _ := strings.Cut(arg, " ")
				i, _ := strconv.Atoi(num)
				runs[i].Finished = true
				runs[i].ExitCode, _ = strconv.Atoi(status)
				finish()
			case "exit":
				if cur >= 0 {
					runs[cur].ExitCode = n
					finish()
				}
				timer.Stop()
			}
		case <-timer.C:
			if cur >= 0 {
				runs[cur].TimedOut = true
				finish()
			}
			killGroup()
		case <-exited:
			// Background processes may still hold the pipe: give them
			// Grace, then kill the group, then stop reading.
			exited = nil
			grace = time.After(s.Grace)
		case <-grace:
			killGroup()
			exitEOF = time.After(5 * time.Second)
		case <-exitEOF:
			rd.Close()
		case <-ctx.Done():
			killGroup()
			<-done
			return runs, ctx.Err()
		}
	}
	killGroup()
	<-done
	return runs, nil
}

// writeScript writes each block's script to its own file and the session's
// script that sources them between marker lines.
func (s session) writeScript(runs []*blockRun, marker string) (string, error) {
	dir := filepath.Join(s.Dir, ".blocks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var b strings.Builder
	// The EXIT trap says how bash ended and stops the lessons' leftover
	// background jobs (a kubelet started with &, a watch never killed).
	fmt.Fprintf(&b, "trap '__podlab_rc=$?; printf \"\\n%%s exit %%d\\n\" %q \"$__podlab_rc\"; __podlab_jobs=$(jobs -p); [ -z \"$__podlab_jobs\" ] || kill $__podlab_jobs 2>/dev/null; exit $__podlab_rc' EXIT\n", marker)
	b.WriteString("set -e\n")
	for i, r := range runs {
		file := filepath.Join(dir, fmt.Sprintf("%03d-%s-line%d.sh", i, r.Lesson.Name(), r.Block.Line))
		if r.Probe {
			file = filepath.Join(dir, fmt.Sprintf("%03d-%s-probe.sh", i, r.Lesson.Name()))
		}
		if err := os.WriteFile(file, []byte(r.Block.Script()), 0o644); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "printf '\\n%%s begin %d\\n' %q\n", i, marker)
		if r.Probe {
			// A probe may fail (that is what it looks for): || keeps set -e
			// from stopping the session, and its status is printed.
			fmt.Fprintf(&b, "__podlab_rc=0; . %q </dev/null || __podlab_rc=$?\n", file)
			fmt.Fprintf(&b, "printf '\\n%%s probed %d %%d\\n' %q \"$__podlab_rc\"\n", i, marker)
			continue
		}
		fmt.Fprintf(&b, ". %q </dev/null\n", file)
		fmt.Fprintf(&b, "printf '\\n%%s end %d\\n' %q\n", i, marker)
	}
	script := filepath.Join(dir, "session.sh")
	return script, os.WriteFile(script, []byte(b.String()), 0o644)
}

// problems describes what went wrong with one block, if anything: it
// failed, timed out, or its output lacks an expected line.
func (r *blockRun) problems(timeout time.Duration) string {
	where := fmt.Sprintf("%s, the sh block at line %d:\n%s", r.Lesson.File, r.Block.Line, indent(r.Block.Commands()))
	switch {
	case r.TimedOut:
		return fmt.Sprintf("%s\ndid not finish within %s; its output so far:\n%s", where, timeout, indent(r.Output))
	case r.Failed():
		return fmt.Sprintf("%s\nfailed (exit status %d) after %s; its output:\n%s", where, r.ExitCode, r.Took.Round(time.Millisecond), indent(r.Output))
	case r.Finished && r.Block.Expected != nil:
		want := r.Block.Expected.Lines()
		if i := lesson.FirstMissing(want, r.Output); i >= 0 {
			return fmt.Sprintf("%s\nprinted no line matching expected line %d of %d (the expected block at line %d), after the lines before it:\n    %s\nits output:\n%s",
				where, i+1, len(want), r.Block.Expected.Line, want[i], indent(r.Output))
		}
	}
	return ""
}

func indent(s string) string {
	if s == "" {
		return "    (nothing)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// ---- The runner's own tests: it must fail when a lesson is wrong. ----

func parseLessons(t *testing.T, texts ...string) []*lesson.Lesson {
	t.Helper()
	var out []*lesson.Lesson
	for i, text := range texts {
		l, err := lesson.Parse(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		l.File = fmt.Sprintf("%02d-test.md", i+1)
		out = append(out, l)
	}
	return out
}

func testSession(t *testing.T, timeout time.Duration) session {
	t.Helper()
	bash := testenv.LookPath(t, "bash") // skips outside CI, fails in CI
	return session{Bash: bash, Dir: t.TempDir(), Env: os.Environ(), Timeout: timeout, Grace: 2 * time.Second}
}

func TestSession_Run(t *testing.T) {
	const fence = "```"
	tests := []struct {
		name    string
		lessons []string
		timeout time.Duration
		// problems is, per block, a substring of its problem ("" for none);
		// notRun the blocks that must not have started.
		problems []string
		notRun   []int
	}{
		{
			name: "variables, cwd and background jobs carry over between blocks and lessons",
			lessons: []string{
				"# 01 — A\n\n" + fence + "sh\nX=1\nmkdir d && cd d\nsleep 30 &\n" + fence + "\n",
				"# 02 — B\n\n" + fence + "sh\necho x=$X in ${PWD##*/}\njobs | wc -l\nkill %1\n" + fence + "\n" + fence + "expected\nx=1 in d\n1\n" + fence + "\n",
			},
			problems: []string{"", ""},
		},
		{
			name:     "a failing command stops the session",
			lessons:  []string{"# 01 — A\n\n" + fence + "sh\necho before\nfalse\necho after\n" + fence + "\n\n" + fence + "sh\necho never\n" + fence + "\n"},
			problems: []string{"failed (exit status 1)", ""},
			notRun:   []int{1},
		},
		{
			name:     "a missing expected line is named",
			lessons:  []string{"# 01 — A\n\n" + fence + "sh\necho one; echo two >&2\n" + fence + "\n" + fence + "expected\none\nthree\n" + fence + "\n"},
			problems: []string{"expected line 2 of 2"},
		},
		{
			name:     "expected lines must come in order",
			lessons:  []string{"# 01 — A\n\n" + fence + "sh\necho one; echo two\n" + fence + "\n" + fence + "expected\ntwo\none\n" + fence + "\n"},
			problems: []string{"expected line 2 of 2"},
		},
		{
			name:     "stdout and stderr lines keep their order, … and spaces are lenient",
			lessons:  []string{"# 01 — A\n\n" + fence + "sh\necho 'ok    root   running as root'; echo 'warn x' >&2; echo tail\n" + fence + "\n" + fence + "expected\nok root … root\nwarn x\ntail\n" + fence + "\n"},
			problems: []string{""},
		},
		{
			name:     "a negated command that succeeds fails the block",
			lessons:  []string{"# 01 — A\n\n" + fence + "sh\n! false\n! true  # must fail\necho after\n" + fence + "\n"},
			problems: []string{"expected to fail, but it succeeded"},
		},
		{
			name:     "a block that hangs times out",
			lessons:  []string{"# 01 — A\n\n" + fence + "sh\necho waiting\nsleep 60\n" + fence + "\n\n" + fence + "sh\necho never\n" + fence + "\n"},
			timeout:  time.Second,
			problems: []string{"did not finish within 1s", ""},
			notRun:   []int{1},
		},
		{
			name:     "a block cannot read the session's script from stdin",
			lessons:  []string{"# 01 — A\n\n" + fence + "sh\ncat\necho read-nothing\n" + fence + "\n" + fence + "expected\nread-nothing\n" + fence + "\n\n" + fence + "sh\necho second\n" + fence + "\n" + fence + "expected\nsecond\n" + fence + "\n"},
			problems: []string{"", ""},
		},
		{
			name:     "a forged marker line without the nonce is plain output",
			lessons:  []string{"# 01 — A\n\n" + fence + "sh\necho '" + markerPrefix + " end 0'\nfalse\n" + fence + "\n"},
			problems: []string{"failed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 20 * time.Second
			}
			s := testSession(t, timeout)
			runs, err := s.run(context.Background(), parseLessons(t, tt.lessons...))
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != len(tt.problems) {
				t.Fatalf("%d blocks run, want %d", len(runs), len(tt.problems))
			}
			for i, r := range runs {
				got := r.problems(timeout)
				want := tt.problems[i]
				switch {
				case want == "" && got != "":
					t.Errorf("block %d: unexpected problem:\n%s", i, got)
				case want != "" && !strings.Contains(got, want):
					t.Errorf("block %d: problem %q, want one containing %q", i, got, want)
				}
			}
			for _, i := range tt.notRun {
				if runs[i].Started {
					t.Errorf("block %d ran after the session should have stopped", i)
				}
			}
		})
	}
}

// TestSession_LeftoverJobsDoNotHang: a background job that ignores SIGTERM
// and holds the output open is killed after the grace period.
func TestSession_LeftoverJobsDoNotHang(t *testing.T) {
	const fence = "```"
	s := testSession(t, 20*time.Second)
	s.Grace = 500 * time.Millisecond
	start := time.Now()
	runs, err := s.run(context.Background(), parseLessons(t,
		"# 01 — A\n\n"+fence+"sh\nsh -c 'trap \"\" TERM; sleep 60' &\necho started\n"+fence+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !runs[0].Finished {
		t.Fatalf("the block did not finish: %s", runs[0].problems(s.Timeout))
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the session took %s: a leftover job held it", took)
	}
}

// TestSession_Probe: a probe runs before a lesson's first block, sees
// what the lessons before left, is recorded for the lesson it was run for
// (the next one, or a later one), and its failure is recorded without
// stopping the session.
func TestSession_Probe(t *testing.T) {
	const fence = "```"
	s := testSession(t, 20*time.Second)
	lessons := parseLessons(t,
		"# 01 — A\n\n"+fence+"sh\ntouch made-by-1\n"+fence+"\n",
		"# 02 — B\n\n"+fence+"sh\necho lesson 2\n"+fence+"\n",
		"# 03 — C\n\n"+fence+"sh\necho lesson 3\n"+fence+"\n",
	)
	s.Probe = func(l *lesson.Lesson) (*lesson.Lesson, string) {
		switch l.Number {
		case 1:
			return nil, ""
		case 2: // for lesson 3, before lesson 2 (an alone run's probe)
			return lessons[2], "echo probing 3 before 2; test -e made-by-2"
		}
		return l, fmt.Sprintf("echo probing %d; test -e made-by-%d", l.Number, l.Number-1)
	}
	runs, err := s.run(context.Background(), lessons)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		lesson   int
		probe    bool
		output   string
		exitCode int
	}
	wants := []want{{1, false, "", 0}, {3, true, "probing 3 before 2", 1}, {2, false, "lesson 2", 0}, {3, true, "probing 3", 1}, {3, false, "lesson 3", 0}}
	if len(runs) != len(wants) {
		t.Fatalf("%d runs, want %d", len(runs), len(wants))
	}
	for i, w := range wants {
		r := runs[i]
		if r.Lesson.Number != w.lesson || r.Probe != w.probe || !r.Started || !r.Finished || r.Output != w.output || r.ExitCode != w.exitCode {
			t.Errorf("run %d: lesson %d, probe %v, started %v, finished %v, output %q, exit code %d; want lesson %d, probe %v, output %q, exit code %d",
				i, r.Lesson.Number, r.Probe, r.Started, r.Finished, r.Output, r.ExitCode, w.lesson, w.probe, w.output, w.exitCode)
		}
	}
}
