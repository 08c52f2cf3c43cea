package lesson

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"sync"
)

// fileRE is a lesson's file name: NN-name.md.
var fileRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d{2})-[a-z0-9][a-z0-9-]*\.md$`) })

// List reads every lesson of dir (the files named NN-name.md), in number
// order. See ListFS.
func List(dir string) ([]*Lesson, error) {
	return ListFS(os.DirFS(dir))
}

// ListFS reads every lesson at the top of fsys (the files named
// NN-name.md), in number order. Each file's number must be its title's, and
// no two files may share a number.
func ListFS(fsys fs.FS) ([]*Lesson, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("listing the lessons: %w", err)
	}
	var out []*Lesson
	seen := map[int]string{}
	for _, e := range entries {
		m := fileRE().FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			continue
		}
		l, err := ParseFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		if n, _ := strconv.Atoi(m[1]); n != l.Number {
			return nil, fmt.Errorf("lesson %s: its title says lesson %02d, its file name %02d", e.Name(), l.Number, n)
		}
		if other, dup := seen[l.Number]; dup {
			return nil, fmt.Errorf("lessons %s and %s have the same number %02d", other, e.Name(), l.Number)
		}
		seen[l.Number] = e.Name()
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}

// ParseFile reads the lesson file name of fsys.
func ParseFile(fsys fs.FS, name string) (*Lesson, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("reading lesson %s: %w", name, err)
	}
	defer f.Close()
	l, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("lesson %s: %w", name, err)
	}
	l.File = path.Base(name)
	return l, nil
}

// Find returns the lesson numbered n of lessons.
func Find(lessons []*Lesson, n int) (*Lesson, error) {
	for _, l := range lessons {
		if l.Number == n {
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w %02d: `podlab lesson` lists them", ErrNotFound, n)
}
