package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/kubectl"
)

// lastApplied is the annotation kubectl apply keeps the applied manifest in,
// to know next time whether anything changed.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

var applyCommand = &cli.Command{
	Name:      "apply",
	Usage:     "create or update objects from Kubernetes YAML or JSON, as kubectl apply -f",
	ArgsUsage: "-f FILE|- [-n NS]",
	Description: `kubectl apply reads manifests (real Kubernetes YAML or JSON, several
documents separated by ---), and for each object asks the API server
whether it exists: if not, it creates it; if so, it sends the new version,
with the stored resourceVersion, as an update. Each request goes through
the whole gate: authentication, authorization, admission, validation.

Decoding is strict, as kubectl's is: a field that the object's kind does not
have (a typo such as "imagePullPolicyy") is an error naming the field and
the document, and nothing from that file is sent.

kubectl keeps the manifest it applied in the annotation
kubectl.kubernetes.io/last-applied-configuration; when it is unchanged, the
object is "unchanged" and nothing is written. (kubectl merges in three ways,
with that annotation; podlab sends the whole manifest, which replaces the
object's spec.)`,
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
		objs, err := kubectl.Decode(r, file)
		if err != nil {
			return err
		}
		if len(objs) == 0 {
			return fmt.Errorf("%s holds no object: nothing to apply", file)
		}
		s, err := openAPI(c, true)
		if err != nil {
			return err
		}
		defer s.Close()
		for _, obj := range objs {
			if err := applyOne(c, s, obj); err != nil {
				return err
			}
		}
		return nil
	},
}

func applyOne(c *cli.Context, s *apiSession, obj apiserver.Object) error {
	res, err := apiserver.ResourceForKind(obj.GetObjectKind().GroupVersionKind())
	if err != nil {
		return err
	}
	if res.Namespaced && obj.GetNamespace() == "" {
		obj.SetNamespace(namespaceOf(c))
	}
	manifest, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[lastApplied] = string(manifest)
	obj.SetAnnotations(ann)
	w := c.App.Writer
	existing, err := s.client.Get(c.Context, res.Name, obj.GetNamespace(), obj.GetName())
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(w, "%s: not found, so create it:\n", kindName(obj))
		created, err := s.client.Create(c.Context, obj)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s created (resourceVersion %s)\n", kindName(created), created.GetResourceVersion())
		return nil
	case err != nil:
		return err
	}
	if existing.GetAnnotations()[lastApplied] == string(manifest) {
		fmt.Fprintf(w, "%s unchanged\n", kindName(obj))
		return nil
	}
	fmt.Fprintf(w, "%s: exists at resourceVersion %s, so update it:\n", kindName(obj), existing.GetResourceVersion())
	obj.SetResourceVersion(existing.GetResourceVersion())
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == "" {
		// a manifest says nothing of the node the scheduler chose: keep it
		pod.Spec.NodeName = existing.(*corev1.Pod).Spec.NodeName
	}
	updated, err := s.client.Update(c.Context, obj)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s configured (resourceVersion %s)\n", kindName(updated), updated.GetResourceVersion())
	return nil
}
