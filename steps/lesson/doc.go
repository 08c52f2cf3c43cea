// Package lesson reads podlab's labs (lessons/NN-name.md), shows them, and
// checks what a learner did against the real state.
//
// A lesson is Markdown in the shape of Kubernetes the Hard Way: a title
// "# NN — Title", then "## Why it matters", "## Commands" (each command
// block after one sentence saying what it does, then the output to expect),
// "## Verification" and "## Next". Its fenced blocks are of three kinds, by
// their info string:
//
//	```sh          Run: commands the lesson makes the learner type. The
//	               lessons' test (lessons/lessons_test.go) runs every one,
//	               in order, all lessons in one bash session.
//	```expected    Expected: lines that must appear, in order, in the output
//	               of the Run block before it. Each is matched as a substring
//	               of one output line, after trimming; runs of spaces count
//	               as one; "…" matches anything.
//	```console     Shown (any other info string, or none): printed, never
//	               run, such as a command that runs until Ctrl-C in a second
//	               terminal, or output that changes from machine to machine.
//
// A Run line "! command" must fail: Script makes the session stop if it
// succeeds (bash's set -e ignores a negated command by itself).
//
// Parse reads one lesson, List every lesson of a directory in number order,
// Render prints one for a terminal or a pipe, and Check runs the checks of
// a lesson number against a state directory: the API server's store (as
// the admin), the content store, bundles, runc's state and the cgroup files,
// each Result saying what to do when it fails.
package lesson
