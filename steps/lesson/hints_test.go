package lesson_test

import (
	"fmt"
	"io/fs"
	"regexp"
	"testing"

	"github.com/podlab/podlab/lessons"
	"github.com/podlab/podlab/steps/lesson"
)

// TestCheck_HintsNameTheLessonsObjects: when a check's hint says which pod
// or Deployment to make (`podlab run NAME`, `podlab create deployment
// NAME`), the lesson makes that one: the check's own lesson, or the one the
// hint names ("lesson 02 creates it"). Issue 16 found check 11's hint
// contradicting lesson 11 about the Deployment's name.
func TestCheck_HintsNameTheLessonsObjects(t *testing.T) {
	made := regexp.MustCompile("`podlab (run|create deployment) ([a-z0-9][a-z0-9-]*)")
	named := regexp.MustCompile(`lesson (\d\d)`)
	text := func(n int) string {
		t.Helper()
		files, err := fs.Glob(lessons.Files, fmt.Sprintf("%02d-*.md", n))
		if err != nil || len(files) != 1 {
			t.Fatalf("lesson %02d: %q, %v", n, files, err)
		}
		b, err := fs.ReadFile(lessons.Files, files[0])
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	state := t.TempDir()
	initLab(t, state)
	env := lesson.Env{StateDir: state, Registry: deadRegistry(t), Runtime: "/nonexistent/runc"}
	seen := 0
	for n := 2; n <= 12; n++ {
		for name, r := range results(t, n, env) {
			for _, m := range made.FindAllStringSubmatch(r.Hint, -1) {
				seen++
				// kubectl's form or podlab's, with a space or = after the name
				makes := regexp.MustCompile(`\b` + m[1] + ` ` + regexp.QuoteMeta(m[2]) + `[ =\n]`)
				where := []int{n}
				for _, l := range named.FindAllStringSubmatch(r.Hint, -1) {
					var k int
					fmt.Sscan(l[1], &k)
					where = append(where, k)
				}
				found := false
				for _, k := range where {
					if makes.MatchString(text(k)) {
						found = true
					}
				}
				if !found {
					t.Errorf("check %d %q: its hint says `podlab %s %s`, which lessons %v never do:\n%s", n, name, m[1], m[2], where, r.Hint)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no hint names a pod or a Deployment to make: the test checks nothing")
	}
}
