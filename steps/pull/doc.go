// Package pull is step 9 of the chain that creates a Pod: the container
// runtime (containerd or CRI-O, asked by the kubelet through the CRI's
// PullImage call) finds the image registry, resolves the image reference to a
// manifest digest, chooses the manifest for this node's platform, and
// downloads the manifest, the config and the layers into its content store.
//
// The content store here is one OCI image layout (oci-layout, index.json,
// blobs/sha256/<hex>): a node's runtime has one (nodes/NAME/content), shared
// by every container on that node, as containerd's content store is, and the
// by-hand stages (podlab pull) have their own (<state-dir>/content). Every blob is written to a temporary
// file, its size and sha256 checked, and only then renamed into blobs/: a
// blob whose bytes do not match its digest never enters the store. Blobs
// already present are never fetched again.
//
// Where to ask is configured as containerd configures it: Options.HostsDir
// is a registry hosts directory (containerd's config_path), and
// <HostsDir>/<registry>/hosts.toml, read with containerd's own parser
// (core/remotes/docker/config), names the registry's mirrors and its
// server. Each host that may resolve and pull is asked in turn, mirrors with
// ?ns=<registry> on every request, and the first that answers is pulled
// from; when none does, the error names each host, what it said, and the
// file (see HostsFile).
//
// The package never prints: Pull returns a Result, and progress goes to an
// io.Writer the caller passes in.
package pull
