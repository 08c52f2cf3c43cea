package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubectl"
)

var applyCommand = &cli.Command{
	Name:      "apply",
	Usage:     "create or update objects from Kubernetes YAML or JSON, as kubectl apply -f",
	ArgsUsage: "-f FILE|- [-n NS]",
	Description: `kubectl apply reads manifests (real Kubernetes YAML or JSON, several
documents separated by ---), and for each object asks the API server
whether it exists. If not, it creates it. If so, it does not send the
manifest back as a replacement: it computes a patch from three versions of
the object, and sends only that.

  original   the manifest applied last time, which kubectl keeps in the
             object's annotation kubectl.kubernetes.io/last-applied-configuration
  modified   this manifest (with that annotation set to this manifest)
  current    the live object, as the API server has it

A field this manifest sets is set. A field the last manifest set and this
one does not is removed. A field no manifest ever set is left alone: the
replicas "podlab scale" chose, a label another tool added, the defaults the
API server filled in. Lists merge the way the object's type says: the
containers of a pod template by name. This is a strategic merge patch, and
the API server applies it to the object it has when the patch arrives, so
two appliers changing different fields never undo each other. Nothing is
sent when the patch is empty: the object is "unchanged".

A manifest that carries metadata.resourceVersion (podlab get -o yaml, edit,
apply) makes that version a precondition: if the object changed since it
was read, the API server answers 409 Conflict and nothing is written;
read it again and redo the change.

Decoding is strict, as kubectl's is: a field that the object's kind does not
have (a typo such as "imagePullPolicyy") is an error naming the field and
the document, and nothing from that file is sent.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "filename", Aliases: []string{"f"}, Usage: "the manifest file, or - for standard input"},
		namespaceFlag(),
	},
	Action: func(c *cli.Context) error {
		file := c.String("filename")
		if file == "" {
			return fmt.Errorf("podlab apply needs -f FILE (or -f - to read standard input)")
		}
		var r io.Reader = c.App.Reader
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return fmt.Errorf("reading the manifest: %w", err)
			}
			defer f.Close()
			r = f
		}
		manifests, err := kubectl.DecodeManifests(r, file)
		if err != nil {
			return err
		}
		if len(manifests) == 0 {
			return fmt.Errorf("%s holds no object: nothing to apply", file)
		}
		s, err := openAPI(c, true)
		if err != nil {
			return err
		}
		defer s.Close()
		w := c.App.Writer
		for _, m := range manifests {
			a, err := kubectl.Apply(c.Context, s.client, m, namespaceOf(c))
			if err != nil {
				return err
			}
			name := restName(a.Resource) + "/" + a.Object.GetName()
			if a.Action == kubectl.Configured {
				fmt.Fprintf(w, "%s: three-way merge of the last-applied configuration, the manifest and the live object (resourceVersion %s): strategic merge patch %s\n",
					name, a.LiveVersion, kubectl.ShortPatch(a.Patch))
			}
			fmt.Fprintf(w, "%s %s\n", name, a.Action)
		}
		return nil
	},
}

// restName is how kubectl names a resource in what it prints:
// "deployment.apps", "pod".
func restName(res apiserver.Resource) string {
	if res.Group == "" {
		return res.Singular
	}
	return res.Singular + "." + res.Group
}
