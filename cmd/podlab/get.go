package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubectl"
)

var getCommand = &cli.Command{
	Name:      "get",
	Usage:     "read objects back from the API server and print them, as kubectl get (step 2)",
	ArgsUsage: "RESOURCE[/NAME] [NAME...] | RESOURCE,RESOURCE... [-n NS | -A] [-o wide|yaml|json|name] [-l SELECTOR] [-w]",
	Description: `kubectl get asks the API server for objects; the API server authenticates
and authorizes the read (the verb is get for one object, list for many,
watch for -w), reads the keys from etcd and sends the objects back. kubectl
formats them: the table's columns (READY, STATUS, AGE, ...) are computed on
the client from the objects' fields.

RESOURCE is any name kubectl accepts: pods, pod, po, nodes, ns, deploy, rs,
events, limits, quota, leases, roles, rolebindings, clusterroles,
clusterrolebindings; or several, with commas (deploy,rs,pods: what a
Deployment made, a table for each).

-o yaml shows the object as stored, with the metadata the API server added:
uid, creationTimestamp, generation, and resourceVersion, which is the
revision of the store's last write to this key (podlab store get
/registry/pods/default/NAME shows the raw bytes).

-w (watch) prints the list, then every change after it, as it is written,
by any process: run it in a second terminal and create, schedule or delete
pods in the first. A watch starts at the list's resourceVersion, so it
misses nothing in between.`,
	Flags: []cli.Flag{
		namespaceFlag(),
		allNamespacesFlag(),
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "wide, yaml, json or name"},
		&cli.StringFlag{Name: "selector", Aliases: []string{"l"}, Usage: "a label selector: app=web,tier!=db"},
		&cli.StringFlag{Name: "field-selector", Usage: "a field selector: spec.nodeName=node-1, status.phase=Running"},
		&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "after the list, print every change as it happens (Ctrl-C ends it)"},
		&cli.BoolFlag{Name: "output-watch-events", Usage: "with -w, say ADDED, MODIFIED or DELETED for each change"},
		&cli.BoolFlag{Name: "show-labels", Usage: "add a LABELS column"},
		&cli.BoolFlag{Name: "no-headers", Usage: "leave out the header line"},
		&cli.BoolFlag{Name: "show-managed-fields", Usage: "with -o yaml or json, keep metadata.managedFields: which manager (podlab-run, kubectl-client-side-apply...) set which fields"},
		&cli.BoolFlag{Name: "show-kind", Usage: "write names as kind/name (always, with several types: get deploy,rs,pods)"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() < 1 {
			return fmt.Errorf("podlab get needs a resource type: podlab get pods (or nodes, deployments, events, ...)")
		}
		if types := c.Args().First(); strings.Contains(types, ",") {
			return getSeveral(c, types)
		}
		res, names, err := resourceArgs(c.Args().Slice())
		if err != nil {
			return err
		}
		s, err := openAPI(c, false)
		if err != nil {
			return err
		}
		defer s.Close()
		ns := namespaceOf(c)
		p, err := kubectl.NewPrinter(c.App.Writer, res, printOptions(c, res))
		if err != nil {
			return err
		}
		opts := apiserver.ListOptions{LabelSelector: c.String("selector"), FieldSelector: c.String("field-selector")}
		var objs []apiserver.Object
		rv := ""
		if len(names) > 0 {
			for _, n := range names {
				obj, err := s.client.Get(c.Context, res.Name, ns, n)
				if err != nil {
					return err
				}
				objs = append(objs, obj)
			}
		} else {
			list, err := s.client.List(c.Context, res.Name, ns, opts)
			if err != nil {
				return err
			}
			objs, rv = list.Items, list.ResourceVersion
		}
		if len(objs) == 0 && !c.Bool("watch") {
			fmt.Fprintln(c.App.ErrWriter, kubectl.NoResources(nsForMessage(res, ns), c.Bool("all-namespaces")))
			return nil
		}
		if len(objs) > 0 {
			if err := p.Print(objs...); err != nil {
				return err
			}
		}
		if !c.Bool("watch") {
			return nil
		}
		return watch(c, s, p, res, ns, names, opts, rv)
	},
}

// printOptions are the printer's options from get's flags.
func printOptions(c *cli.Context, res apiserver.Resource) kubectl.PrintOptions {
	return kubectl.PrintOptions{
		Output: c.String("output"), AllNamespaces: c.Bool("all-namespaces") && res.Namespaced,
		ShowLabels: c.Bool("show-labels"), NoHeaders: c.Bool("no-headers"), WatchEvents: c.Bool("output-watch-events"),
		ShowKind: c.Bool("show-kind"), ShowManagedFields: c.Bool("show-managed-fields"),
	}
}

// getSeveral is `get deploy,rs,pods`: one list per type, printed together
// (kubectl.PrintLists).
func getSeveral(c *cli.Context, types string) error {
	if c.NArg() > 1 || strings.Contains(types, "/") {
		return fmt.Errorf("%q: name objects with one resource type (podlab get pods web), not several", strings.Join(c.Args().Slice(), " "))
	}
	var resources []apiserver.Resource
	for _, t := range strings.Split(types, ",") {
		res, err := apiserver.LookupResource(t)
		if err != nil {
			return err
		}
		resources = append(resources, res)
	}
	if c.Bool("watch") {
		return fmt.Errorf("watch is only supported on individual resources and resource collections, but %d resources were found: watch them one at a time", len(resources))
	}
	s, err := openAPI(c, false)
	if err != nil {
		return err
	}
	defer s.Close()
	ns := namespaceOf(c)
	opts := apiserver.ListOptions{LabelSelector: c.String("selector"), FieldSelector: c.String("field-selector")}
	lists := make([]kubectl.ResourceObjects, 0, len(resources))
	found := false
	for _, res := range resources {
		list, err := s.client.List(c.Context, res.Name, ns, opts)
		if err != nil {
			return err
		}
		lists = append(lists, kubectl.ResourceObjects{Resource: res, Objects: list.Items})
		found = found || len(list.Items) > 0
	}
	if !found && c.String("output") != "yaml" && c.String("output") != "json" {
		fmt.Fprintln(c.App.ErrWriter, kubectl.NoResources(ns, c.Bool("all-namespaces")))
		return nil
	}
	popts := printOptions(c, resources[0])
	popts.AllNamespaces = c.Bool("all-namespaces")
	return kubectl.PrintLists(c.App.Writer, lists, popts)
}

// watch prints every change after revision rv until Ctrl-C.
func watch(c *cli.Context, s *apiSession, p *kubectl.Printer, res apiserver.Resource, ns string, names []string, opts apiserver.ListOptions, rv string) error {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(names) == 1 {
		opts.FieldSelector = joinSelector(opts.FieldSelector, "metadata.name="+names[0])
	}
	opts.ResourceVersion = rv
	w, err := s.client.Watch(ctx, res.Name, ns, opts)
	if err != nil {
		return err
	}
	for ev := range w.Events() {
		if err := p.PrintEvent(ev); err != nil {
			return err
		}
	}
	if err := w.Err(); err != nil && ctx.Err() == nil {
		if apierrors.IsResourceExpired(err) {
			return fmt.Errorf("%w\nThe watch fell behind the store's compaction: run the command again to list and watch anew", err)
		}
		return err
	}
	return nil // Ctrl-C: the watch is over
}

func joinSelector(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

// resourceArgs reads "pods", "pods web db" or "pod/web".
func resourceArgs(args []string) (apiserver.Resource, []string, error) {
	first, name, hasName := strings.Cut(args[0], "/")
	res, err := apiserver.LookupResource(first)
	if err != nil {
		return res, nil, err
	}
	var names []string
	if hasName {
		if name == "" {
			return res, nil, fmt.Errorf("%q names no object: write %s/NAME", args[0], first)
		}
		names = append(names, name)
	}
	for _, a := range args[1:] {
		if strings.Contains(a, "/") {
			return res, nil, fmt.Errorf("%q: give one resource type, then names (podlab get pods web db), or TYPE/NAME alone", a)
		}
		names = append(names, a)
	}
	return res, names, nil
}

// nsForMessage is the namespace "No resources found in X namespace." names.
func nsForMessage(res apiserver.Resource, ns string) string {
	if !res.Namespaced {
		return ""
	}
	return ns
}

// printObjects prints objects with kubectl's -o.
func printObjects(c *cli.Context, output string, objs ...apiserver.Object) error {
	if len(objs) == 0 {
		return nil
	}
	res, err := apiserver.ResourceForKind(objs[0].GetObjectKind().GroupVersionKind())
	if err != nil {
		return err
	}
	p, err := kubectl.NewPrinter(c.App.Writer, res, kubectl.PrintOptions{Output: output})
	if err != nil {
		return err
	}
	return p.Print(objs...)
}
