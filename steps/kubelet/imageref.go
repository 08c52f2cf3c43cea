package kubelet

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// imageRef is a container's image reference read the way the kubelet reads
// it (its applyDefaultImageTag: "nginx" is docker.io/library/nginx:latest):
// the kubelet parses the name to report InvalidImageName before it asks
// the runtime for anything; the runtime resolves and pulls it.
type imageRef struct {
	// Repo is registry/repository ("docker.io/library/nginx"), the
	// repository of the status's imageID (repo@digest).
	Repo string
	// Ref is the normalized reference: Repo, then :tag and/or @digest.
	Ref string
}

// parseImageRef normalizes image, or says why it does not parse.
func parseImageRef(image string) (imageRef, error) {
	if strings.TrimSpace(image) == "" {
		return imageRef{}, fmt.Errorf("empty image reference (try nginx or docker.io/library/nginx:latest)")
	}
	r, err := name.ParseReference(image, name.StrictValidation)
	if err != nil {
		// tags are optional for the kubelet: latest is the default
		r, err = name.ParseReference(image)
	}
	if err != nil {
		return imageRef{}, fmt.Errorf("invalid reference format %q: %v (a reference is [registry/]repository[:tag][@sha256:digest], the repository in lowercase)", image, err)
	}
	reg := r.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	out := imageRef{Repo: reg + "/" + r.Context().RepositoryStr()}
	out.Ref = out.Repo
	switch r := r.(type) {
	case name.Tag:
		out.Ref += ":" + r.TagStr()
	case name.Digest:
		base, _, _ := strings.Cut(image, "@")
		if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
			out.Ref += ":" + base[i+1:]
		}
		out.Ref += "@" + r.DigestStr()
	}
	return out, nil
}
