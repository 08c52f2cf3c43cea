package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/last"
	"github.com/podlab/podlab/steps/statedir"
)

// What the by-hand stages remember (steps/last): each one records what it
// made, and the next one uses it when its argument is left out, saying so.

// lastPath is the record of the state directory dir.
func lastPath(dir string) string { return statedir.Layout{Dir: dir}.LastMade() }

// loadLast reads the record of c's state directory.
func loadLast(c *cli.Context) (last.Record, error) {
	dir, err := stateDir(c)
	if err != nil {
		return last.Record{}, err
	}
	return last.Load(lastPath(dir))
}

// recordLast updates the record of c's state directory. The stage's work
// is done by then: a record that cannot be written is a warning, not a
// failure.
func recordLast(c *cli.Context, change func(*last.Record)) {
	dir, err := stateDir(c)
	if err == nil {
		err = last.Update(lastPath(dir), change)
	}
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "warning: %v (the next stage will need its argument)\n", err)
	}
}

// inState shows path relative to the state directory when it is inside it
// ("bundles/nginx"), else whole.
func inState(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// pathExists says whether path exists; any error but "not there" counts as
// there (the stage itself then says what is wrong).
func pathExists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
