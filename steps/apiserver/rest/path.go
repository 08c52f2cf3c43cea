package rest

import (
	"strings"
)

// requestInfo is what a resource path names, as kube-apiserver's
// RequestInfoFactory reads it:
//
//	/api/v1/namespaces/default/pods/web/status
//	/apis/apps/v1/deployments            (every namespace)
//	/api/v1/watch/namespaces/default/pods (the old watch prefix)
type requestInfo struct {
	group, version string
	namespace      string
	resource       string
	name           string
	subresource    string
	watchPrefix    bool
}

// namespaceSubresources are the subresources of a namespace, which its
// path names in the place of a namespaced resource.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// parsePath reads a resource path; ok is false for every other path
// (/api, /apis/apps/v1, /version...).
func parsePath(path string) (requestInfo, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var info requestInfo
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		info.version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		info.group, info.version, parts = parts[1], parts[2], parts[3:]
	default:
		return info, false
	}
	if parts[0] == "watch" {
		info.watchPrefix, parts = true, parts[1:]
		if len(parts) == 0 {
			return info, false
		}
	}
	if parts[0] == "namespaces" && len(parts) > 2 && !namespaceSubresources[parts[2]] {
		info.namespace, parts = parts[1], parts[2:]
	}
	for _, p := range parts {
		if p == "" {
			return info, false
		}
	}
	switch len(parts) {
	case 1:
		info.resource = parts[0]
	case 2:
		info.resource, info.name = parts[0], parts[1]
	case 3:
		info.resource, info.name, info.subresource = parts[0], parts[1], parts[2]
	default:
		return info, false
	}
	return info, true
}
