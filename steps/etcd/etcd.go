// Package etcd starts a real etcd for the lab: the key-value store every
// Kubernetes cluster keeps its state in, and which kube-apiserver alone
// talks to (podlab apiserver --etcd-servers). podlab's default store is a
// bbolt file that plays etcd's role in-process (steps/store); a real etcd
// is a server of its own, with its own data directory, that the API server
// reaches over gRPC.
//
// The binary is built by `make deps` from the Go module proxy (tools/etcd:
// a main around go.etcd.io/etcd/server/v3/etcdmain) into bin/etcd, beside
// bin/etcdctl. One member, on loopback: its data under
// <state>/etcd/member-data, clients on the port given (2379, etcd's, by
// default), peers on the next one. Clients may reach it at more addresses
// (Config.AlsoOn): `podlab etcd` adds the lab network's gateway, the
// address the machines of joined nodes see the host at, as a control-plane
// host's etcd listens on the host's own address besides loopback.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultClientPort is etcd's own client port; the peer port is the next.
const DefaultClientPort = 2379

// ErrNoBinary is returned by Find when no etcd binary is found.
var ErrNoBinary = errors.New("etcd not found: `make deps` builds it into bin/etcd (tools/etcd)")

// Config is one lab etcd member.
type Config struct {
	Name       string // the member's name ("podlab")
	DataDir    string // its --data-dir
	Host       string // the address it listens on: "127.0.0.1"
	ClientPort int    // clients (the API server, etcdctl); peers on ClientPort+1
	// AlsoOn are more addresses clients reach it at, on the same port (the
	// lab network's gateway); peers stay on Host.
	AlsoOn []string
}

// Validate says what is wrong with c, in words that say what to do.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("etcd needs a member name")
	case c.DataDir == "" || !filepath.IsAbs(c.DataDir):
		return fmt.Errorf("etcd's data directory %q must be an absolute path", c.DataDir)
	case c.Host == "":
		return errors.New("etcd needs an address to listen on (127.0.0.1)")
	case c.ClientPort < 1 || c.ClientPort > 65534:
		return fmt.Errorf("etcd's client port %d is not in 1-65534 (the peer port is the next one)", c.ClientPort)
	}
	for _, a := range c.AlsoOn {
		if _, err := netip.ParseAddr(a); err != nil {
			return fmt.Errorf("etcd's client address %q is not an IP address: %w", a, err)
		}
	}
	return nil
}

// ClientURL is where clients reach it: what `podlab apiserver
// --etcd-servers` and `etcdctl --endpoints` take.
func (c Config) ClientURL() string {
	return "http://" + net.JoinHostPort(c.Host, strconv.Itoa(c.ClientPort))
}

// ClientURLs are every URL clients reach it at: ClientURL first, then one
// per address of AlsoOn.
func (c Config) ClientURLs() []string {
	urls := []string{c.ClientURL()}
	for _, a := range c.AlsoOn {
		urls = append(urls, "http://"+net.JoinHostPort(a, strconv.Itoa(c.ClientPort)))
	}
	return urls
}

func (c Config) peerURL() string {
	return "http://" + net.JoinHostPort(c.Host, strconv.Itoa(c.ClientPort+1))
}

// Args are etcd's flags for the member: a one-member cluster, as
// kubeadm's stacked etcd is one member per control-plane node.
func (c Config) Args() []string {
	return []string{
		"--name", c.Name,
		"--data-dir", c.DataDir,
		"--listen-client-urls", strings.Join(c.ClientURLs(), ","),
		"--advertise-client-urls", strings.Join(c.ClientURLs(), ","),
		"--listen-peer-urls", c.peerURL(),
		"--initial-advertise-peer-urls", c.peerURL(),
		"--initial-cluster", c.Name + "=" + c.peerURL(),
		"--initial-cluster-state", "new",
		"--log-level", "warn",
	}
}

// Command is the etcd process for c, from the binary bin, not started. It
// makes the data directory (0700, as etcd wants it) first.
func (c Config) Command(ctx context.Context, bin string) (*exec.Cmd, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("making etcd's data directory: %w", err)
	}
	return exec.CommandContext(ctx, bin, c.Args()...), nil
}

// Find returns the etcd binary: bin/etcd beside the running podlab, or
// etcd on PATH.
func Find() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "etcd")
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath("etcd")
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return "", ErrNoBinary
	}
	return p, err
}
