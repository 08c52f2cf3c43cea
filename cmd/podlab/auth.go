package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/kubectl"
)

var authCommand = &cli.Command{
	Name:  "auth",
	Usage: "ask the API server's authorizer about a user's permissions",
	Subcommands: []*cli.Command{{
		Name:      "can-i",
		Usage:     "may this user do VERB on RESOURCE? (kubectl auth can-i)",
		ArgsUsage: "VERB RESOURCE[/SUBRESOURCE] [NAME] [-n NS] [--as USER] | --list",
		Description: `The second gate of every request is authorization: RBAC looks for a
RoleBinding in the request's namespace, or a ClusterRoleBinding, that names
the user (or one of the user's groups) and refers to a Role or ClusterRole
with a rule allowing the verb on the resource. Nothing allows by default.
A kubelet's request (user system:node:NAME, group system:nodes) goes first
to the Node authorizer (--authorization-mode=Node,RBAC): it allows a node
only its own Node, the pods bound to it, and what they use; nothing binds
the ClusterRole system:node, so RBAC allows a node nothing more.

podlab auth can-i asks that question without doing anything, as kubectl's
SelfSubjectAccessReview does. It prints yes or no, and which binding and
role decided; it exits 1 for no. --list prints every rule the user has in
the namespace.

  podlab auth can-i create pods --as viewer
  podlab auth can-i create pods/binding --as system:kube-scheduler
  podlab auth can-i delete nodes --as developer
  podlab auth can-i get pods web --as system:node:node-1`,
		Flags: []cli.Flag{
			namespaceFlag(),
			&cli.BoolFlag{Name: "list", Usage: "list every rule the user has in the namespace"},
		},
		Action: func(c *cli.Context) error {
			s, err := openAPI(c, false)
			if err != nil {
				return err
			}
			defer s.Close()
			w := c.App.Writer
			if c.Bool("list") {
				u, rules, err := s.client.Rules(c.Context, namespaceOf(c))
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "What %s may do in namespace %q:\n", u.Name, namespaceOf(c))
				tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
				fmt.Fprintln(tw, "Resources\tNon-Resource URLs\tResource Names\tVerbs")
				for _, r := range rules {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ruleResources(r.APIGroups, r.Resources), list(r.NonResourceURLs), list(r.ResourceNames), list(r.Verbs))
				}
				return tw.Flush()
			}
			if c.NArg() < 2 {
				return fmt.Errorf("podlab auth can-i needs a verb and a resource: podlab auth can-i create pods [--as USER]")
			}
			verb, resource := c.Args().Get(0), c.Args().Get(1)
			for _, warning := range kubectl.CanIWarnings(verb, strings.HasPrefix(resource, "/")) {
				fmt.Fprintf(c.App.ErrWriter, "Warning: %s\n", warning)
			}
			resource, sub, _ := strings.Cut(resource, "/")
			u, d, err := s.client.Access(c.Context, verb, resource, sub, namespaceOf(c), c.Args().Get(2))
			if err != nil {
				return err
			}
			if d.Allowed {
				fmt.Fprintln(w, "yes")
				fmt.Fprintf(w, "  (%s: %s)\n", u.Name, d.Reason)
				return nil
			}
			fmt.Fprintln(w, "no")
			reason := d.Reason
			if reason == "" {
				// over the network: kube-apiserver's RBAC gives no reason
				// for a plain denial, and podlab's API server gives none
				// in the SelfSubjectAccessReview either
				reason = "no RBAC rule allows it (the API server's -v log says which bindings RBAC looked at)"
			}
			fmt.Fprintf(w, "  (%s: %s)\n", u.Name, reason)
			return cli.Exit("", 1)
		},
	}},
}

func ruleResources(groups, resources []string) string {
	var out []string
	for _, r := range resources {
		for _, g := range groups {
			if g == "" {
				out = append(out, r)
			} else {
				out = append(out, r+"."+g)
			}
		}
	}
	return list(out)
}

func list(s []string) string {
	return "[" + strings.Join(s, " ") + "]"
}
