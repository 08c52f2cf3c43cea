package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
)

var runCommand = &cli.Command{
	Name:      "run",
	Usage:     "create a Pod through the API server's gate, as kubectl run (steps 1 to 3)",
	ArgsUsage: "NAME --image IMAGE [--port N] [--labels k=v,...] [--env K=V]... [-n NS] [--as USER] [-- COMMAND ARGS...]",
	Description: `kubectl run sends a Pod to the API server, which:

  1. authenticates the request: who is this? (a bearer token here; a 401 if
     it is unknown, before anything else happens)
  2. authorizes it: may this user create pods in this namespace? (RBAC;
     a 403 if not)
  3. defaults and admits it: the API's defaults (restartPolicy,
     dnsPolicy, imagePullPolicy...) are set while the request is decoded,
     before admission; then mutating admission plugins change the pod
     (the namespace must exist and not be terminating; ServiceAccount,
     DefaultTolerationSeconds, LimitRanger's defaults, Priority,
     RuntimeClass; mutating webhooks), the pod's fields are validated, then
     validating plugins accept or reject it (PodSecurity, from the
     namespace's pod-security.kubernetes.io/enforce label; ResourceQuota;
     validating webhooks)
  4. stores it in etcd, at a new revision: the pod's resourceVersion

and answers. That is all: the pod is Pending, with no node, and nothing
runs it yet. The scheduler (podlab scheduler) will bind it to a node, and
that node's kubelet will run it. Every phase is printed as it happens;
-v adds what each looked at and changed.

Arguments after -- replace the image's command: with --command they are the
container's command (entrypoint), otherwise its args.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "image", Usage: "the container image (required)"},
		namespaceFlag(),
		&cli.IntFlag{Name: "port", Usage: "the port the container exposes"},
		&cli.StringFlag{Name: "labels", Aliases: []string{"l"}, Usage: "labels, k=v,k2=v2 (default run=NAME)"},
		&cli.StringSliceFlag{Name: "env", Usage: "an environment variable, K=V (repeat)"},
		&cli.BoolFlag{Name: "command", Usage: "the arguments after -- are the command, not the args"},
		&cli.StringFlag{Name: "restart", Usage: "the restart policy: Always, OnFailure, Never"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "print the stored pod: yaml, json or name"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() < 1 {
			return fmt.Errorf("podlab run needs a pod name: podlab run NAME --image IMAGE")
		}
		if c.String("image") == "" {
			return fmt.Errorf("podlab run %s needs --image: the container image to run, for example --image nginx", c.Args().First())
		}
		pod, err := podFromFlags(c)
		if err != nil {
			return err
		}
		s, err := openAPI(c, true)
		if err != nil {
			return err
		}
		defer s.Close()
		fmt.Fprintf(c.App.Writer, "POST /api/v1/namespaces/%s/pods (pod %q), through the API server's gate:\n", pod.Namespace, pod.Name)
		created, err := s.client.Create(c.Context, pod)
		if err != nil {
			return err
		}
		return printStored(c, created)
	},
}

func podFromFlags(c *cli.Context) (*corev1.Pod, error) {
	name := c.Args().First()
	labels := map[string]string{"run": name}
	if l := c.String("labels"); l != "" {
		var err error
		if labels, err = parseLabels(l); err != nil {
			return nil, err
		}
	}
	ctr := corev1.Container{Name: name, Image: c.String("image")}
	if p := c.Int("port"); p != 0 {
		ctr.Ports = []corev1.ContainerPort{{ContainerPort: int32(p)}}
	}
	for _, e := range c.StringSlice("env") {
		k, v, ok := cutEnv(e)
		if !ok {
			return nil, fmt.Errorf("--env %q: want NAME=VALUE", e)
		}
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: k, Value: v})
	}
	rest := c.Args().Tail()
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:] // the separator itself is not an argument
	}
	if len(rest) > 0 {
		if c.Bool("command") {
			ctr.Command = rest
		} else {
			ctr.Args = rest
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespaceOf(c), Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{ctr}},
	}
	if r := c.String("restart"); r != "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicy(r)
	}
	return pod, nil
}

// printStored says what was stored and, for a pod, what happens next.
func printStored(c *cli.Context, obj apiserver.Object) error {
	if o := c.String("output"); o != "" {
		return printObjects(c, o, obj)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "%s created (resourceVersion %s, uid %s)\n", kindName(obj), obj.GetResourceVersion(), obj.GetUID())
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == "" {
		fmt.Fprintf(w, "\nThe pod is stored and Pending: it has no node, and nothing runs it yet.\n")
		fmt.Fprintf(w, "Next, the scheduler binds it to a node (podlab scheduler). See it: podlab get pod %s -n %s\n", pod.Name, pod.Namespace)
	}
	return nil
}
