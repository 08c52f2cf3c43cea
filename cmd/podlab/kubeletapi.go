package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/urfave/cli/v2"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podlab/podlab/steps/kubelet"
	kubeletserver "github.com/podlab/podlab/steps/kubelet/server"
	"github.com/podlab/podlab/steps/machine"
	"github.com/podlab/podlab/steps/pki"
	"github.com/podlab/podlab/steps/statedir"
)

// kubeletEndpoint is where a kubelet's API listens, for its Node's status
// (zero: it serves none).
type kubeletEndpoint struct {
	Address string
	Port    int32
}

// kubeletAPI is the kubelet's HTTPS API: its listener, opened before the
// kubelet registers its Node so the Node can publish the port.
type kubeletAPI struct {
	ln  net.Listener
	tls *tls.Config
}

// listenKubeletAPI opens the kubelet API's port (--address, --port). When
// the default port is taken (another node's kubelet on this machine), it
// takes any free port and says so; a --port given that is taken is an
// error. It returns nil, and prints why, when the node has no serving
// certificate and --port was not asked for. The kubelet of a joined node
// (m not nil) listens on its machine's lab address unless --address says
// otherwise.
func listenKubeletAPI(c *cli.Context, m *machine.Machine) (*kubeletAPI, error) {
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	l, err := statedir.New(dir)
	if err != nil {
		return nil, err
	}
	node := c.String("node")
	tlsConfig, err := pki.KubeletTLSConfig(l, node)
	if err != nil {
		if c.IsSet("port") {
			return nil, fmt.Errorf("serving the kubelet API of %s: %w", node, err)
		}
		fmt.Fprintf(c.App.ErrWriter, "warning: no kubelet API for %s (kubectl logs and exec will not reach it): %v\n", node, err)
		return nil, nil
	}
	addr := c.String("address")
	if m != nil && !c.IsSet("address") {
		addr = m.IP().String()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(c.Int("port"))))
	if err != nil && !c.IsSet("port") {
		fmt.Fprintf(c.App.ErrWriter, "kubelet API: port %d is taken (another kubelet?): using a free port instead\n", c.Int("port"))
		ln, err = net.Listen("tcp", net.JoinHostPort(addr, "0"))
	}
	if err != nil {
		return nil, fmt.Errorf("listening for the kubelet API: %w (choose another --port)", err)
	}
	return &kubeletAPI{ln: ln, tls: tlsConfig}, nil
}

func (a *kubeletAPI) endpoint() kubeletEndpoint {
	if a == nil {
		return kubeletEndpoint{}
	}
	tcp := a.ln.Addr().(*net.TCPAddr)
	return kubeletEndpoint{Address: tcp.IP.String(), Port: int32(tcp.Port)}
}

// Close closes the listener (Serve closes it too).
func (a *kubeletAPI) Close() {
	if a != nil {
		a.ln.Close()
	}
}

// serve starts serving k's API until ctx ends; done waits for it to stop.
// The kubelet authorizes each request with a SubjectAccessReview sent
// with the node's own kubeconfig (--kubeconfig when the command has it).
func (a *kubeletAPI) serve(ctx context.Context, c *cli.Context, k *kubelet.Kubelet) (done func() error, err error) {
	if a == nil {
		return func() error { return nil }, nil
	}
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	l, err := statedir.New(dir)
	if err != nil {
		return nil, err
	}
	kc, err := componentKubeconfig(c, k.Node())
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, fmt.Errorf("the kubelet API authorizes with the API server as the node: reading %s: %w (run `podlab init`)", kc, err)
	}
	sars, err := authorizationclient.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	cas, err := pki.ClientCAs(l)
	if err != nil {
		return nil, err
	}
	w := c.App.Writer
	h, err := kubeletserver.New(kubeletserver.Config{
		Node: k.Node(), Host: k, ClientCAs: cas,
		Authorizer: kubeletserver.SubjectAccessReviews(sars.SubjectAccessReviews()),
		OnRequest:  func(r kubeletserver.Request) { printKubeletRequest(w, r) },
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "kubelet API: serving https://%s (/containerLogs, /exec); it asks %s whether each caller may\n", a.ln.Addr(), rc.Host)
	errc := make(chan error, 1)
	go func() { errc <- kubeletserver.Serve(ctx, a.ln, a.tls, h) }()
	return func() error {
		err := <-errc
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		return err
	}, nil
}

func printKubeletRequest(w interface{ Write([]byte) (int, error) }, r kubeletserver.Request) {
	who := r.User
	if who == "" {
		who = "no client certificate"
	}
	line := fmt.Sprintf("kubelet API: %s %s (%s): %d", r.Method, r.Path, who, r.Code)
	if r.Reason != "" {
		line += ": " + r.Reason
	}
	fmt.Fprintln(w, line)
}
