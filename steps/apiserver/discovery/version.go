package discovery

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/version"
)

// Version is what /version answers: the Kubernetes release whose API podlab
// serves (the release of the embedded documents), marked as podlab's with
// semver build metadata, as distributions mark theirs (v1.37.2+k3s1):
// v1.37.2+podlab. kubectl parses gitVersion as semver (for `kubectl
// version` and its version-skew warning), so it must stay one.
func Version(src Source) (version.Info, error) {
	v := strings.TrimPrefix(src.Version, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) != 3 {
		return version.Info{}, fmt.Errorf("the embedded documents' release %q is not vMAJOR.MINOR.PATCH", src.Version)
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil {
		return version.Info{}, fmt.Errorf("the embedded documents' release %q: minor version: %w", src.Version, err)
	}
	return version.Info{
		Major:          parts[0],
		Minor:          parts[1],
		EmulationMajor: parts[0],
		EmulationMinor: parts[1],
		// kube-apiserver stays compatible with the release before its own.
		MinCompatibilityMajor: parts[0],
		MinCompatibilityMinor: strconv.Itoa(minor - 1),
		GitVersion:            "v" + v + "+podlab",
		GitCommit:             "",
		GitTreeState:          "clean",
		BuildDate:             "1970-01-01T00:00:00Z",
		GoVersion:             runtime.Version(),
		Compiler:              runtime.Compiler,
		Platform:              runtime.GOOS + "/" + runtime.GOARCH,
	}, nil
}
