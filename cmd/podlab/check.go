package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/lesson"
)

var checkCommand = &cli.Command{
	Name:      "check",
	Usage:     "check that the state is what lesson N leaves: one PASS or FAIL line per check",
	ArgsUsage: "N [--registry HOST:PORT] [--runtime PATH]",
	Description: `Each lesson makes you do something real: store a pod, compact the store,
pull an image, unpack it, write a spec, run a container. "podlab check N"
looks at what is really there, as each Kubernetes component would find it:

  the API server's store   read as the admin, through the gate (authentication,
                           RBAC), as kubectl get does
  the content store        <state-dir>/content, the runtime's images and blobs
  bundles                  <state-dir>/bundles/hello: rootfs/ and config.json
  runc                     runc's state of the container, and the limits the
                           kernel holds in its cgroup files
  nodes                    <state-dir>/nodes/<node>/: what each kubelet runs

Each check looks for what the lesson's work left behind, never only for
what is absent: an object, an Event, a file a stage wrote, or a write in
the store's history (the watch log podlab trace reads: "pod db was
created, then deleted" finds db's ADDED and DELETED there). So a lesson's
checks fail until the lesson is done (but lesson 01's, which look at the
machine and the registry).

It prints one line per check, "PASS name" or "FAIL name: what to do", and
exits 1 if any failed. Run it right after lesson N: a later lesson may change
what it looks at (lesson 04 binds the pod lesson 02 left Pending).

Examples:
  podlab check 2
  podlab check 06
  podlab check 1 --registry 127.0.0.1:5001`,
	Flags: []cli.Flag{
		&cli.StringFlag{
			Name:    "registry",
			Usage:   "the local registry's HOST:PORT, for lesson 01",
			EnvVars: []string{"REGISTRY"},
			Value:   lesson.DefaultRegistry,
		},
		&cli.StringFlag{
			Name:  "runtime",
			Usage: "the OCI runtime binary; default $PODLAB_RUNTIME, else bin/runc next to podlab, else runc on PATH",
		},
	},
	Action: func(c *cli.Context) error {
		n, err := lessonNumber(c)
		if err != nil {
			return err
		}
		if !lesson.HasChecks(n) {
			return fmt.Errorf("lesson %02d has no checks: `podlab lesson` lists the lessons", n)
		}
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		env := lesson.Env{StateDir: dir, Registry: c.String("registry"), Runtime: c.String("runtime")}
		failed := 0
		for _, r := range lesson.Check(c.Context, n, env) {
			if r.OK {
				fmt.Fprintf(c.App.Writer, "PASS %s\n", r.Name)
				continue
			}
			failed++
			fmt.Fprintf(c.App.Writer, "FAIL %s: %s\n", r.Name, r.Hint)
		}
		if failed > 0 {
			return fmt.Errorf("%d check(s) of lesson %02d failed in %s: do what each FAIL line says, then check again", failed, n, dir)
		}
		return nil
	},
}
