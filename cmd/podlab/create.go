package main

import (
	"fmt"
	"path"
	"strings"

	"github.com/urfave/cli/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
)

var createCommand = &cli.Command{
	Name:  "create",
	Usage: "create a Deployment or a Namespace, as kubectl create",
	Subcommands: []*cli.Command{
		{
			Name:      "deployment",
			Aliases:   []string{"deploy"},
			Usage:     "create a Deployment (the chain's steps 1 to 3)",
			ArgsUsage: "NAME --image IMAGE [--replicas N] [--port N] [-n NS]",
			Description: `A Deployment asks for N copies of a pod template, kept up to date. The API
server stores it like any object; nothing else happens until the
controller-manager's Deployment controller sees it and creates a ReplicaSet
named NAME-<pod-template-hash>, whose controller creates the pods, which
the scheduler binds and the kubelets run.

As kubectl create deployment does, the pods get the label app=NAME, which
is also the Deployment's selector, and the container is named after the
image (nginx for docker.io/library/nginx:1.25).`,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "image", Usage: "the container image (required)"},
				&cli.IntFlag{Name: "replicas", Value: 1, Usage: "how many pods"},
				&cli.IntFlag{Name: "port", Usage: "the port the container exposes"},
				namespaceFlag(),
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "print the stored object: yaml, json or name"},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return fmt.Errorf("podlab create deployment needs one name: podlab create deployment NAME --image IMAGE")
				}
				if c.String("image") == "" {
					return fmt.Errorf("podlab create deployment %s needs --image IMAGE", c.Args().First())
				}
				if c.Int("replicas") < 0 {
					return fmt.Errorf("--replicas %d: a Deployment cannot have fewer than 0 replicas", c.Int("replicas"))
				}
				d := deploymentFromFlags(c)
				return createAndPrint(c, d)
			},
		},
		{
			Name:      "namespace",
			Aliases:   []string{"ns"},
			Usage:     "create a Namespace",
			ArgsUsage: "NAME [--labels k=v,...]",
			Description: `A Namespace is a scope for names, RBAC RoleBindings, quotas and limit ranges,
and, with the label pod-security.kubernetes.io/enforce=baseline or
restricted, for the Pod Security level its pods must meet.`,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "labels", Aliases: []string{"l"}, Usage: "labels, k=v,k2=v2"},
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "print the stored object: yaml, json or name"},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return fmt.Errorf("podlab create namespace needs one name: podlab create namespace NAME")
				}
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Args().First()}}
				if l := c.String("labels"); l != "" {
					labels, err := parseLabels(l)
					if err != nil {
						return err
					}
					ns.Labels = labels
				}
				return createAndPrint(c, ns)
			},
		},
	},
}

func deploymentFromFlags(c *cli.Context) *appsv1.Deployment {
	name := c.Args().First()
	image := c.String("image")
	labels := map[string]string{"app": name}
	replicas := int32(c.Int("replicas"))
	ctr := corev1.Container{Name: containerName(image), Image: image}
	if p := c.Int("port"); p != 0 {
		ctr.Ports = []corev1.ContainerPort{{ContainerPort: int32(p)}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespaceOf(c), Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{ctr}},
			},
		},
	}
}

// containerName is what kubectl create deployment names the container: the
// image's last path element, without tag or digest.
func containerName(image string) string {
	n := path.Base(image)
	if i := strings.IndexAny(n, ":@"); i > 0 {
		n = n[:i]
	}
	return n
}

func createAndPrint(c *cli.Context, obj apiserver.Object) error {
	s, err := openAPI(c, true)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(c.App.Writer, "create %s, through the API server's gate:\n", kindName(obj))
	created, err := s.client.Create(c.Context, obj)
	if err != nil {
		return err
	}
	return printStored(c, created)
}
