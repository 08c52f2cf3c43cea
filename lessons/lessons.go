// Package lessons holds podlab's labs: one Markdown file per stage of the
// chain, NN-name.md, in the shape steps/lesson reads (see README.md). They
// are embedded so that `podlab lesson` shows them from any directory;
// lessons_test.go runs every sh block of every lesson, in order, and checks
// the output each expected block lists.
package lessons

import "embed"

// Files holds README.md and every lesson file.
//
//go:embed README.md [0-9][0-9]-*.md
var Files embed.FS
