package main

import (
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/podlab/podlab/lessons"
	"github.com/podlab/podlab/steps/lesson"
)

var lessonCommand = &cli.Command{
	Name:      "lesson",
	Usage:     "list the lessons, or show one: the chain, stage by stage, to type yourself",
	ArgsUsage: "[N] [--lang en|zh-TW] [--dir DIR]",
	Description: `The lessons walk the chain from "kubectl run" to a running process, one lab
per stage, in the shape of Kubernetes the Hard Way: why the stage matters,
the commands (each after one sentence saying what it does), the output to
expect, a Verification section, and what comes next. Run them in order, as
root, on one state directory: each builds on the one before.

  01-03  the machine, the registry, the API server's gate and its store
  04-05  the scheduler binds a pod; the kubelet runs it
  06-09  the container runtime's own stages: pull, unpack, spec, runc
  10-13  status and logs, Deployments, everything at once, cleaning up

Without N, it lists them. With N, it prints lesson N: plain text when the
output is a file or a pipe (headings underlined, code indented), with bold
headings and colored commands on a terminal. The blocks marked sh are what
you type; "podlab check N" then tells you whether the state is what lesson
N should leave. Every sh block of every lesson is run by podlab's tests
(make test), so the output shown is the output you get.

The lessons are also in Traditional Chinese (zh-TW), the language of the
description of the chain podlab re-enacts: the same commands and expected
output, the prose in Taiwan's usage (lessons/zh-TW/GLOSSARY.md fixes each
term). They are shown when your locale is zh_TW (the first of LC_ALL,
LC_MESSAGES and LANG that is set), or with --lang zh-TW; --lang en forces
English. A lesson not translated yet is shown in English, with one line
saying so.

Examples:
  podlab lesson
  podlab lesson 2
  podlab lesson 1 --lang zh-TW
  LANG=zh_TW.UTF-8 podlab lesson
  podlab lesson 5 | less
  podlab check 2`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "dir", Usage: "read the lessons from DIR (default: the ones built into podlab, the repository's lessons/)"},
		&cli.StringFlag{Name: "lang", Usage: "the lessons' language: en or zh-TW (default: zh-TW when LC_ALL, LC_MESSAGES or LANG says zh_TW, else en)"},
	},
	Action: func(c *cli.Context) error {
		lang, err := lessonLang(c)
		if err != nil {
			return err
		}
		all, err := lessonList(c)
		if err != nil {
			return err
		}
		if all, err = lesson.Translate(lessonFS(c), all, lang); err != nil {
			return err
		}
		w := c.App.Writer
		if c.NArg() == 0 {
			dir := "lessons" // in the repository, and built into podlab
			if d := c.String("dir"); d != "" {
				dir = d
			}
			if err := lesson.RenderList(w, all, dir); err != nil {
				return err
			}
			if lang == lesson.TraditionalChinese {
				fmt.Fprintln(w, "\n顯示一課：podlab lesson N。檢查你做的：podlab check N。英文原文：podlab lesson N --lang en。")
			} else {
				fmt.Fprintln(w, "\nShow one: podlab lesson N. Check what you did: podlab check N.")
			}
			return nil
		}
		n, err := lessonNumber(c)
		if err != nil {
			return err
		}
		l, err := lesson.Find(all, n)
		if err != nil {
			return err
		}
		if lang != lesson.English && l.Lang != lang {
			fmt.Fprintf(c.App.ErrWriter, "第 %02d 課還沒有%s翻譯，以下是英文原文。(lesson %02d is not translated into %s yet: showing the English)\n", n, langName(lang), n, lang)
		}
		return lesson.Render(w, l, writesToTerminal(w))
	},
}

// lessonLang is --lang, else the language the locale asks for.
func lessonLang(c *cli.Context) (string, error) {
	if c.IsSet("lang") {
		return lesson.ParseLang(c.String("lang"))
	}
	return lesson.LangFromEnv(os.Getenv), nil
}

// langName is a language's name in that language.
func langName(lang string) string {
	if lang == lesson.TraditionalChinese {
		return "繁體中文"
	}
	return lang
}

// lessonList reads the lessons of --dir, or the ones built into podlab.
func lessonList(c *cli.Context) ([]*lesson.Lesson, error) {
	return lesson.ListFS(lessonFS(c))
}

// lessonFS is --dir, or the lessons built into podlab.
func lessonFS(c *cli.Context) fs.FS {
	if d := c.String("dir"); d != "" {
		return os.DirFS(d)
	}
	return lessons.Files
}

// lessonNumber is the one argument N of `podlab lesson N` and `podlab check N`.
func lessonNumber(c *cli.Context) (int, error) {
	if c.NArg() != 1 {
		return 0, fmt.Errorf("want one lesson number, got %q: `podlab lesson` lists them", c.Args().Slice())
	}
	n, err := strconv.Atoi(c.Args().First())
	if err != nil || n < 0 {
		return 0, fmt.Errorf("lesson %q: want a number such as 2 or 02 (`podlab lesson` lists them)", c.Args().First())
	}
	return n, nil
}

// writesToTerminal reports whether w is a terminal (for colors).
func writesToTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
