package main

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/apiserver/webhook"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
)

func newWebhookCommand() *cli.Command {
	return &cli.Command{
		Name:  "webhook",
		Usage: "an admission webhook server, for the API server to call (lesson 02)",
		Description: `Admission webhooks are admission plugins that are not in the API server:
HTTPS servers of your own, which the API server calls for every write that
the rules of a MutatingWebhookConfiguration or ValidatingWebhookConfiguration
(admissionregistration.k8s.io/v1) match. "podlab webhook serve" is a small
one, to see both kinds for real.`,
		Subcommands: []*cli.Command{newWebhookServeCommand()},
	}
}

func newWebhookServeCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve a mutating webhook that adds a label and a validating one that denies a label, until interrupted",
		ArgsUsage: "[--add-label KEY=VALUE] [--deny-label KEY[=VALUE]] [--addr 127.0.0.1:0]",
		Description: `The API server calls an admission webhook with a POST of an AdmissionReview
(admission.k8s.io/v1): the object, the old object on an update, the user,
the operation and a uid. The webhook answers the same AdmissionReview with
a response: allowed or not, a Status saying why, and, for a mutating
webhook, a JSONPatch (RFC 6902) the API server applies to the object.

This server answers two paths:

  POST /mutate     a mutating webhook: adds the labels --add-label names
                   ({"op":"add","path":"/metadata/labels/KEY","value":...})
                   and sends a warning saying so
  POST /validate   a validating webhook: denies an object that carries the
                   label --deny-label names (KEY, or KEY=VALUE)

It serves HTTPS with a certificate it issues itself (CN=podlab-webhook, for
127.0.0.1 and localhost), signed by the cluster's CA (<state-dir>/pki/ca.crt,
which podlab init made): the caBundle of the webhook configurations is that
CA, base64, and the API server trusts nothing else. Every review it answers
is logged, one line each.

Example (lesson 02):
  podlab webhook serve --add-label team=lab --deny-label env=forbidden --addr 127.0.0.1:8443 &
  kubectl apply -f mutating.yaml -f validating.yaml    # url: https://127.0.0.1:8443/mutate ...`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "add-label", Usage: "the mutating webhook adds this label (KEY=VALUE) to every object it is sent"},
			&cli.StringFlag{Name: "deny-label", Usage: "the validating webhook denies every object with this label (KEY or KEY=VALUE)"},
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:0", Usage: "address to listen on (host:port; port 0 picks a free one)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("webhook serve takes no arguments, got %q: pass --add-label KEY=VALUE and --deny-label KEY[=VALUE]", c.Args().Slice())
			}
			p := webhook.Policy{DenyLabel: c.String("deny-label")}
			if l := c.String("add-label"); l != "" {
				labels, err := parseLabels(l)
				if err != nil {
					return fmt.Errorf("--add-label %q: %w (write KEY=VALUE)", l, err)
				}
				p.AddLabels = labels
			}
			dir, err := stateDir(c)
			if err != nil {
				return err
			}
			l, err := statedir.New(dir)
			if err != nil {
				return err
			}
			ca, err := pki.LoadCA(l, time.Now())
			if err != nil {
				return fmt.Errorf("the webhook's certificate is signed by the cluster CA: %w", err)
			}
			kp, err := ca.Issue(pki.Spec{CommonName: "podlab-webhook", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
				DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", c.String("addr"))
			if err != nil {
				return fmt.Errorf("listening on %s: %w (choose another --addr)", c.String("addr"), err)
			}
			w := c.App.Writer
			base := "https://" + ln.Addr().String()
			fmt.Fprintf(w, "Admission webhooks listening on %s (certificate CN=podlab-webhook, signed by the cluster CA %s)\n", base, l.CACert())
			fmt.Fprintf(w, "  POST %s/mutate    mutating: adds label %s\n", base, orNone(c.String("add-label")))
			fmt.Fprintf(w, "  POST %s/validate  validating: denies label %s\n", base, orNone(p.DenyLabel))
			fmt.Fprintf(w, "caBundle for the webhook configurations: base64 -w0 %s\n", l.CACert())
			fmt.Fprintln(w, "Serving until Ctrl-C. Reviews (path, operation, kind, namespace/name, user: answer):")
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return webhook.Serve(ctx, ln, kp.TLSCertificate(), p, func(line string) { fmt.Fprintln(w, line) })
		},
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
