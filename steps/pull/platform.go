package pull

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// HostPlatform is the platform of this machine, as a kubelet's runtime uses
// it to choose from an image index: "linux/amd64", "linux/arm64/v8",
// "linux/arm/v7".
func HostPlatform() v1.Platform {
	p := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	switch runtime.GOARCH {
	case "arm64":
		p.Variant = "v8"
	case "arm":
		p.Variant = "v7"
	}
	return p
}

// ParsePlatform reads "os/arch[/variant]", e.g. "linux/arm64/v8".
func ParsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return v1.Platform{}, fmt.Errorf("invalid platform %q: want os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8", s)
	}
	p := v1.Platform{OS: strings.ToLower(parts[0]), Architecture: normalizeArch(strings.ToLower(parts[1]))}
	if len(parts) == 3 {
		p.Variant = strings.ToLower(parts[2])
	}
	return p, nil
}

func normalizeArch(a string) string {
	switch a {
	case "x86_64", "x86-64":
		return "amd64"
	case "aarch64":
		return "arm64"
	case "i386", "i686":
		return "386"
	}
	return a
}

// platformString is "os/arch[/variant]".
func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// platformMatches reports whether an image built for have runs on want.
// An empty variant in want accepts any variant; arm64's only variant is v8,
// so "linux/arm64" and "linux/arm64/v8" are the same platform.
func platformMatches(want, have v1.Platform) bool {
	if want.OS != have.OS || want.Architecture != normalizeArch(have.Architecture) {
		return false
	}
	return want.Variant == "" || variant(want) == variant(have)
}

func variant(p v1.Platform) string {
	if p.Variant == "" && normalizeArch(p.Architecture) == "arm64" {
		return "v8"
	}
	return p.Variant
}

// IndexChoice tells which manifest of an image index was chosen, and why.
type IndexChoice struct {
	// Digest and MediaType are the index's own.
	Digest    v1.Hash
	MediaType types.MediaType
	// Manifests is how many manifests the index lists.
	Manifests int
	// Platforms lists the platforms the index offers, in its order
	// (attestation manifests, platform unknown/unknown, are left out).
	Platforms []string
	// Chosen is the manifest pulled.
	Chosen v1.Descriptor
	// Via lists the nested indexes followed to reach Chosen, when the
	// index's entry for the platform was itself an index.
	Via []v1.Hash
	// Reason says why Chosen was chosen.
	Reason string
}

// String is e.g. "index with 4 manifests: chose linux/amd64 (matches --platform)".
func (c IndexChoice) String() string {
	s := fmt.Sprintf("index with %d manifests: chose %s (%s)", c.Manifests, platformString(*c.Chosen.Platform), c.Reason)
	for _, v := range c.Via {
		s += fmt.Sprintf(", through nested index %s", v)
	}
	return s
}

// chooseManifest picks the manifest for want from an index, as containerd's
// platform matcher does: the first manifest whose platform runs on want.
// explicit says whether want came from --platform or is the host's.
func chooseManifest(idx *v1.IndexManifest, want v1.Platform, explicit bool) (v1.Descriptor, string, []string, error) {
	var available []string
	for _, m := range idx.Manifests {
		if m.Platform == nil || m.Platform.OS == "unknown" {
			continue // attestations and other non-runnable manifests
		}
		available = append(available, platformString(*m.Platform))
	}
	for _, m := range idx.Manifests {
		if m.Platform == nil || !(isImageManifest(m.MediaType) || isIndex(m.MediaType)) {
			continue // an index entry for the platform is followed, as containerd does
		}
		if platformMatches(want, *m.Platform) {
			reason := "matches --platform " + platformString(want)
			if !explicit {
				reason = "matches this host's platform " + platformString(want) + "; --platform chooses another"
			}
			return m, reason, available, nil
		}
	}
	for _, m := range idx.Manifests {
		if m.Platform != nil && platformMatches(want, *m.Platform) {
			// it has the platform, in a form podlab cannot pull: say so
			return v1.Descriptor{}, "", available, fmt.Errorf("%w: the index's %s entry %s is %q, neither an image manifest nor an index (podlab pulls OCI and Docker schema 2 images)",
				ErrUnsupportedMediaType, platformString(*m.Platform), m.Digest, m.MediaType)
		}
	}
	return v1.Descriptor{}, "", available, fmt.Errorf("%w: the index has no manifest for %s; available platforms: %s (pass one with --platform)",
		ErrNoMatchingPlatform, platformString(want), strings.Join(available, ", "))
}

func isIndex(mt types.MediaType) bool {
	return mt == types.OCIImageIndex || mt == types.DockerManifestList
}

func isImageManifest(mt types.MediaType) bool {
	return mt == types.OCIManifestSchema1 || mt == types.DockerManifestSchema2
}

// sniffMediaType reads the media type a manifest declares, or guesses it
// from its fields when it declares none (an OCI manifest may omit it).
func sniffMediaType(b []byte) types.MediaType {
	var m struct {
		SchemaVersion int             `json:"schemaVersion"`
		MediaType     types.MediaType `json:"mediaType"`
		Manifests     json.RawMessage `json:"manifests"`
		Config        json.RawMessage `json:"config"`
	}
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	switch {
	case m.MediaType != "":
		return m.MediaType
	case m.SchemaVersion == 1:
		return types.DockerManifestSchema1
	case m.Manifests != nil:
		return types.OCIImageIndex
	case m.Config != nil:
		return types.OCIManifestSchema1
	}
	return ""
}
