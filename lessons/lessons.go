// Package lessons holds podlab's labs: one Markdown file per stage of the
// chain, NN-name.md, in the shape steps/lesson reads (see README.md). They
// are embedded so that `podlab lesson` shows them from any directory;
// lessons_test.go runs every sh block of every lesson, in order, and checks
// the output each expected block lists.
package lessons

import "embed"

// Files holds README.md, every lesson file, and the translations: zh-TW/
// holds the lessons in Traditional Chinese (the same file names, the same
// sh and expected blocks), their index and their glossary.
//
//go:embed README.md [0-9][0-9]-*.md zh-TW/README.md zh-TW/GLOSSARY.md zh-TW/[0-9][0-9]-*.md
var Files embed.FS
