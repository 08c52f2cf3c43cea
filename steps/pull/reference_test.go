package pull

import (
	"errors"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const someDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseReference(t *testing.T) {
	tests := []struct {
		name, in, want string
		hub            bool
		ident          string
	}{
		{"short name means Docker Hub library and latest", "nginx", "docker.io/library/nginx:latest", true, "latest"},
		{"tag", "nginx:1.27", "docker.io/library/nginx:1.27", true, "1.27"},
		{"user repository", "bitnami/nginx", "docker.io/bitnami/nginx:latest", true, "latest"},
		{"docker.io without library", "docker.io/nginx", "docker.io/library/nginx:latest", true, "latest"},
		{"index.docker.io", "index.docker.io/library/nginx:1", "docker.io/library/nginx:1", true, "1"},
		{"digest", "nginx@" + someDigest, "docker.io/library/nginx@" + someDigest, true, someDigest},
		{"tag and digest keeps both, fetches the digest", "nginx:1.27@" + someDigest, "docker.io/library/nginx:1.27@" + someDigest, true, someDigest},
		{"other registry", "ghcr.io/org/app:v2", "ghcr.io/org/app:v2", false, "v2"},
		{"registry with port", "127.0.0.1:5000/demo/hello", "127.0.0.1:5000/demo/hello:latest", false, "latest"},
		{"localhost", "localhost/app:dev", "localhost/app:dev", false, "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseReference(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if r.IsDockerHub() != tt.hub {
				t.Errorf("IsDockerHub() = %v, want %v", r.IsDockerHub(), tt.hub)
			}
			if r.Identifier() != tt.ident {
				t.Errorf("Identifier() = %q, want %q", r.Identifier(), tt.ident)
			}
			// Normalizing is idempotent: the stored name parses to itself.
			again, err := ParseReference(r.String())
			if err != nil || again.String() != r.String() {
				t.Errorf("ParseReference(%q) = %q, %v; want itself", r.String(), again.String(), err)
			}
		})
	}
}

func TestParseReference_Bad(t *testing.T) {
	for _, in := range []string{"", "  ", "UPPER/case", "nginx:", "nginx@sha256:1234", "a b", "nginx:bad tag", "/nginx", "nginx@@" + someDigest} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseReference(in)
			if !errors.Is(err, ErrBadReference) {
				t.Fatalf("ParseReference(%q) = %v, want ErrBadReference", in, err)
			}
		})
	}
}

func TestPlatformMatches(t *testing.T) {
	p := func(s string) v1.Platform {
		pl, err := ParsePlatform(s)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	tests := []struct {
		want, have string
		ok         bool
	}{
		{"linux/amd64", "linux/amd64", true},
		{"linux/amd64", "linux/arm64", false},
		{"linux/amd64", "windows/amd64", false},
		{"linux/arm64", "linux/arm64/v8", true},
		{"linux/arm64/v8", "linux/arm64", true},
		{"linux/arm/v7", "linux/arm/v6", false},
		{"linux/arm", "linux/arm/v6", true},
		{"linux/x86_64", "linux/amd64", true},
	}
	for _, tt := range tests {
		t.Run(tt.want+"_on_"+tt.have, func(t *testing.T) {
			if got := platformMatches(p(tt.want), p(tt.have)); got != tt.ok {
				t.Errorf("platformMatches(%s, %s) = %v, want %v", tt.want, tt.have, got, tt.ok)
			}
		})
	}
	for _, bad := range []string{"linux", "", "linux/", "/amd64", "a/b/c/d"} {
		if _, err := ParsePlatform(bad); err == nil || !strings.Contains(err.Error(), "os/arch") {
			t.Errorf("ParsePlatform(%q) = %v, want an error explaining os/arch", bad, err)
		}
	}
}
