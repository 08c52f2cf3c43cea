package pull

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
)

// dockerHub is how people write Docker Hub's registry name; the API lives at
// index.docker.io (registry-1.docker.io), which is where ggcr sends requests.
const dockerHub = "docker.io"

// pathComponent is one component of a repository path, as the distribution
// spec (and Docker) define it.
var pathComponent = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$`) })

// Reference is an image reference read the way Docker, containerd and the
// kubelet read it: "nginx" is docker.io/library/nginx:latest.
type Reference struct {
	// Registry is the registry host as people write it: "docker.io",
	// "127.0.0.1:5000", "ghcr.io".
	Registry string
	// Repository is the path inside the registry: "library/nginx".
	Repository string
	// Tag is the tag asked for ("latest" when neither a tag nor a digest was
	// given); empty when only a digest was given.
	Tag string
	// Digest is "sha256:<hex>" when the reference names a digest. A digest
	// wins over a tag: it is what is fetched.
	Digest string

	ref name.Reference
}

// ParseReference reads an image reference such as "nginx",
// "nginx:1.27", "ghcr.io/org/app@sha256:..." or
// "127.0.0.1:5000/demo/hello:v1". Options are ggcr's (name.Insecure allows
// plain HTTP to the registry).
func ParseReference(s string, opts ...name.Option) (Reference, error) {
	if strings.TrimSpace(s) == "" {
		return Reference{}, fmt.Errorf("%w: empty reference (try nginx or docker.io/library/nginx:latest)", ErrBadReference)
	}
	r, err := name.ParseReference(s, opts...)
	if err != nil {
		return Reference{}, fmt.Errorf("%w %q: %v (a reference is [registry/]repository[:tag][@sha256:digest], the repository in lowercase, e.g. nginx:1.27 or 127.0.0.1:5000/demo/hello:v1)", ErrBadReference, s, err)
	}
	for _, c := range strings.Split(r.Context().RepositoryStr(), "/") {
		if !pathComponent().MatchString(c) {
			return Reference{}, fmt.Errorf("%w %q: repository path component %q must be lowercase letters and digits, separated by '.', '_', '__' or '-'", ErrBadReference, s, c)
		}
	}
	out := Reference{
		Registry:   familiarRegistry(r.Context().RegistryStr()),
		Repository: r.Context().RepositoryStr(),
		ref:        r,
	}
	switch r := r.(type) {
	case name.Tag:
		out.Tag = r.TagStr()
	case name.Digest:
		out.Digest = r.DigestStr()
		// "nginx:1.27@sha256:..." keeps its tag for display, as Docker does.
		base, _, _ := strings.Cut(s, "@")
		if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
			out.Tag = base[i+1:]
		}
	}
	return out, nil
}

// String is the normalized reference, e.g. "docker.io/library/nginx:latest".
// It is the name the content store keeps the image under.
func (r Reference) String() string {
	s := r.Registry + "/" + r.Repository
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Name is the ggcr reference: what is fetched (the digest when there is one).
func (r Reference) Name() name.Reference { return r.ref }

// IsDockerHub reports whether the reference points at Docker Hub, the only
// registry a --registry-mirror applies to.
func (r Reference) IsDockerHub() bool { return r.Registry == dockerHub }

// Identifier is what the registry is asked for: the digest if given, else
// the tag.
func (r Reference) Identifier() string {
	if r.Digest != "" {
		return r.Digest
	}
	return r.Tag
}

func familiarRegistry(reg string) string {
	if reg == name.DefaultRegistry {
		return dockerHub
	}
	return reg
}
