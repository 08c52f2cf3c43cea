package pull

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// manifestAccept is what a runtime tells the registry it understands: an
// index (multi-platform) or a single image manifest, OCI or Docker.
var manifestAccept = strings.Join([]string{
	string(types.OCIImageIndex),
	string(types.DockerManifestList),
	string(types.OCIManifestSchema1),
	string(types.DockerManifestSchema2),
}, ", ")

// registryClient speaks the OCI distribution API to one repository:
// HEAD/GET /v2/<repo>/manifests/<tag-or-digest> and GET /v2/<repo>/blobs/<digest>.
type registryClient struct {
	repo name.Repository
	http *http.Client
}

// newRegistryClient pings the registry (GET /v2/), learns how it wants to be
// authenticated, and returns a client holding the credentials
// (a bearer token for Docker Hub) for pulling from repo.
func newRegistryClient(ctx context.Context, repo name.Repository, keychain authn.Keychain, base http.RoundTripper) (*registryClient, error) {
	auth, err := keychain.Resolve(repo)
	if err != nil {
		return nil, fmt.Errorf("reading credentials for %s: %w", repo.RegistryStr(), err)
	}
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, base, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		if isNetworkError(err) {
			return nil, fmt.Errorf("%w: contacting registry %s (GET %s://%s/v2/): %v",
				ErrRegistryUnreachable, repo.RegistryStr(), repo.Scheme(), repo.RegistryStr(), err)
		}
		return nil, fmt.Errorf("contacting registry %s: %w", repo.RegistryStr(), err)
	}
	return &registryClient{repo: repo, http: &http.Client{Transport: rt}}, nil
}

func isNetworkError(err error) bool {
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue)
}

func (c *registryClient) url(kind, id string) string {
	return fmt.Sprintf("%s://%s/v2/%s/%s/%s", c.repo.Scheme(), c.repo.RegistryStr(), c.repo.RepositoryStr(), kind, id)
}

func (c *registryClient) do(ctx context.Context, method, u string, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %v", ErrRegistryUnreachable, method, u, err)
	}
	return resp, nil
}

// headManifest asks the registry which manifest a tag or digest names,
// without downloading it: the answer is the Docker-Content-Digest header.
// ok is false when the registry does not answer HEAD usefully; the caller
// then GETs the manifest.
func (c *registryClient) headManifest(ctx context.Context, id string) (d v1.Descriptor, ok bool, err error) {
	resp, err := c.do(ctx, http.MethodHead, c.url("manifests", id), manifestAccept)
	if err != nil {
		return v1.Descriptor{}, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return v1.Descriptor{}, false, c.notFound(id, resp)
	}
	if resp.StatusCode != http.StatusOK {
		return v1.Descriptor{}, false, nil
	}
	h, err := v1.NewHash(resp.Header.Get("Docker-Content-Digest"))
	if err != nil {
		return v1.Descriptor{}, false, nil
	}
	size, _ := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64)
	return v1.Descriptor{
		Digest:    h,
		Size:      size,
		MediaType: types.MediaType(resp.Header.Get("Content-Type")),
	}, true, nil
}

func (c *registryClient) notFound(id string, resp *http.Response) error {
	detail := ""
	if resp.Request != nil && resp.Request.Method != http.MethodHead {
		if err := transport.CheckError(resp, http.StatusOK); err != nil {
			detail = ": " + err.Error()
		}
	}
	what := "tag " + id
	if strings.Contains(id, ":") {
		what = "digest " + id
	}
	return fmt.Errorf("%w: %s has no %s%s (check the spelling, or list its tags with `crane ls %s`)",
		ErrManifestUnknown, c.repo.Name(), what, detail, c.repo.Name())
}

// manifest GETs a manifest or index, reads it whole (it is small), and
// computes its digest. When id is a digest, the bytes must hash to it.
func (c *registryClient) manifest(ctx context.Context, id string) ([]byte, v1.Descriptor, error) {
	resp, err := c.do(ctx, http.MethodGet, c.url("manifests", id), manifestAccept)
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, v1.Descriptor{}, c.notFound(id, resp)
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		return nil, v1.Descriptor{}, fmt.Errorf("fetching manifest %s from %s: %w", id, c.repo.Name(), err)
	}
	want, byDigest := v1.Hash{}, false
	if h, err := v1.NewHash(id); err == nil {
		want, byDigest = h, true
	}
	announced, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	kind := manifestKind(types.MediaType(strings.TrimSpace(announced))) // the body is not read to tell
	if resp.ContentLength > MaxManifestSize {
		return nil, v1.Descriptor{}, fmt.Errorf("fetching manifest %s from %s: %w", id, c.repo.Name(),
			tooLarge(kind, want, resp.ContentLength, MaxManifestSize))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifestSize+1))
	if err != nil {
		return nil, v1.Descriptor{}, fmt.Errorf("fetching manifest %s from %s: %w", id, c.repo.Name(), err)
	}
	if len(b) > MaxManifestSize {
		return nil, v1.Descriptor{}, fmt.Errorf("fetching manifest %s from %s: %w", id, c.repo.Name(),
			tooLarge(kind, want, int64(len(b)), MaxManifestSize)) // more than announced, or not announced
	}
	alg := "sha256" // what registries name a tag's manifest by
	if byDigest {
		alg = want.Algorithm
	}
	got, err := hashBytes(alg, b)
	if err != nil {
		return nil, v1.Descriptor{}, fmt.Errorf("fetching manifest %s from %s: %w", id, c.repo.Name(), err)
	}
	if byDigest && want != got {
		return nil, v1.Descriptor{}, fmt.Errorf("%w: manifest from %s: expected %s, got %s", ErrDigestMismatch, c.repo.Name(), want, got)
	}
	mt := types.MediaType(resp.Header.Get("Content-Type"))
	if i := strings.IndexByte(string(mt), ';'); i >= 0 {
		mt = types.MediaType(strings.TrimSpace(string(mt[:i])))
	}
	if fromBody := sniffMediaType(b); fromBody != "" {
		mt = fromBody
	}
	return b, v1.Descriptor{Digest: got, Size: int64(len(b)), MediaType: mt}, nil
}

// blob opens a blob's download. The caller verifies the bytes.
func (c *registryClient) blob(ctx context.Context, d v1.Hash) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, c.url("blobs", d.String()), "")
	if err != nil {
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("fetching blob %s from %s: %w", d, c.repo.Name(), err)
	}
	return resp.Body, nil
}
