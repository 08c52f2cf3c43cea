package pull

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// HostsFile is where, under a registry hosts directory (containerd's
// config_path, <state-dir>/certs.d), the hosts of registry host are named:
// <dir>/<host>/hosts.toml.
func HostsFile(dir, host string) string { return filepath.Join(dir, host, "hosts.toml") }

// source is one place a reference can be pulled from, in the order a
// runtime tries them: each mirror of its registry, then the registry.
type source struct {
	repo name.Repository
	// mirror is the mirror's URL ("http://127.0.0.1:5001"), "" for the
	// registry itself.
	mirror string
	// ns is the registry the mirror stands in for (?ns=docker.io on each
	// request, as containerd sends it), "" for the registry itself.
	ns string
}

// hostSources reads <dir>/<registry>/hosts.toml with containerd's own
// parser (core/remotes/docker/config) and returns the hosts that may
// resolve and pull, in its order: the mirrors, then the server. It
// returns nil, "" when there is no such file: the reference's own registry
// is then the only source.
func hostSources(ctx context.Context, dir string, r Reference, insecure bool) ([]source, string, error) {
	if dir == "" {
		return nil, "", nil
	}
	file := HostsFile(dir, r.Registry)
	if _, err := os.Stat(file); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("reading the registry hosts of %s: %w", r.Registry, err)
	}
	hosts, err := config.ConfigureHosts(ctx, config.HostOptions{HostDir: config.HostDirFromRoot(dir)})(r.Registry)
	if err != nil {
		return nil, file, fmt.Errorf("reading %s: %w", file, err)
	}
	var out []source
	for i, h := range hosts {
		if !h.Capabilities.Has(docker.HostCapabilityResolve) || !h.Capabilities.Has(docker.HostCapabilityPull) {
			continue
		}
		if p := strings.TrimSuffix(h.Path, "/"); p != "/v2" {
			return nil, file, fmt.Errorf("reading %s: host %s has path %q: podlab pulls only from /v2 (remove override_path)", file, h.Host, h.Path)
		}
		var opts []name.Option
		if h.Scheme == "http" || insecure {
			opts = append(opts, name.Insecure)
		}
		repo, err := name.NewRepository(h.Host+"/"+r.Repository, opts...)
		if err != nil {
			return nil, file, fmt.Errorf("reading %s: host %q: %w", file, h.Host, err)
		}
		s := source{repo: repo}
		if i < len(hosts)-1 { // containerd lists the server last; the others are mirrors
			s.mirror = h.Scheme + "://" + h.Host
			s.ns = r.Registry
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, file, fmt.Errorf("reading %s: no host in it may resolve and pull (capabilities = [\"pull\", \"resolve\"])", file)
	}
	return out, file, nil
}

// nsTransport adds ?ns=<registry> to each request to a mirror, as
// containerd does: one mirror can then serve several registries.
type nsTransport struct {
	ns   string
	base http.RoundTripper
}

func (t nsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/v2/" || req.URL.Path == "/v2" {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	q := req.URL.Query()
	q.Set("ns", t.ns)
	req.URL.RawQuery = q.Encode()
	return t.base.RoundTrip(req)
}

// resolveFirst asks each source in turn for the manifest id (HEAD) and
// returns a client of the first that answers, recording it in res. When
// none answers, the error names each source tried and what it said, and
// wraps every one of their errors (ErrRegistryUnreachable among them when
// a host could not be reached).
func resolveFirst(ctx context.Context, sources []source, id string, keychain authn.Keychain, base http.RoundTripper, res *Result) (*registryClient, v1.Descriptor, bool, error) {
	var errs []error
	var tried []string
	for _, s := range sources {
		if err := ctx.Err(); err != nil {
			return nil, v1.Descriptor{}, false, err
		}
		rt := base
		if s.ns != "" {
			rt = nsTransport{ns: s.ns, base: base}
		}
		client, err := newRegistryClient(ctx, s.repo, keychain, rt)
		var head v1.Descriptor
		var ok bool
		if err == nil {
			head, ok, err = client.headManifest(ctx, id)
		}
		if err == nil {
			res.Source, res.Mirror = s.repo.Name(), s.mirror
			return client, head, ok, nil
		}
		if len(sources) == 1 {
			return nil, v1.Descriptor{}, false, err
		}
		what := "the registry " + s.repo.Scheme() + "://" + s.repo.RegistryStr()
		if s.mirror != "" {
			what = "the mirror " + s.mirror
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", what, err))
		errs = append(errs, err)
	}
	msg := fmt.Sprintf("no host answered; tried %s, as %s names them", strings.Join(tried, ", then "), res.HostsFile)
	return nil, v1.Descriptor{}, false, &hostsError{msg: msg, errs: errs}
}

// hostsError says that no host of a hosts.toml answered; it wraps each
// host's error (errors.Is finds ErrRegistryUnreachable among them) and
// says each once.
type hostsError struct {
	msg  string
	errs []error
}

func (e *hostsError) Error() string   { return e.msg }
func (e *hostsError) Unwrap() []error { return e.errs }
