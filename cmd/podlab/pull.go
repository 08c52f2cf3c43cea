package main

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/units"
	"github.com/podlab/podlab/steps/kubelet"

	"github.com/podlab/podlab/steps/last"
	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/statedir"
)

var pullCommand = &cli.Command{
	Name:      "pull",
	Usage:     "pull an image from its registry into the content store (step 9)",
	ArgsUsage: "REF [--platform OS/ARCH[/VARIANT]] [--registry-mirror URL] [--insecure]",
	Description: `Step 9 of creating a Pod: the kubelet asks the container runtime (containerd,
CRI-O) through the CRI's PullImage call for the image in the Pod's spec, and
the runtime downloads it. podlab pull does what the runtime does:

1. Read the reference. "nginx" is short for docker.io/library/nginx:latest:
   a registry (docker.io), a repository (library/nginx) and a tag (latest),
   or a digest (nginx@sha256:...) which names exact bytes and never moves.

2. Find the registry and resolve the reference. The runtime speaks the OCI
   distribution API over HTTPS: GET /v2/ (to learn how to authenticate;
   credentials come from ~/.docker/config.json), then
   HEAD /v2/library/nginx/manifests/latest, whose answer is the digest of
   the manifest the tag points to now.

3. Choose the platform. A tag often names an image INDEX: a list of
   manifests, one per platform (linux/amd64, linux/arm64/v8, ...). The
   runtime chooses the one for its node (--platform chooses another). An
   entry for the platform that is itself an index is followed, as
   containerd follows it (at most 4 deep).

4. Read the MANIFEST: the image's table of contents. It names the CONFIG
   (a JSON blob: entrypoint, cmd, env, working dir, user, ports, and the
   diff_ids of the layers) and the LAYERS (compressed tar files, each a
   filesystem change), every one by size and sha256 digest.

5. Download what is missing into the CONTENT STORE, a few layers at a time.
   Here it is one OCI image layout, <state-dir>/content (oci-layout,
   index.json, blobs/sha256/<hex>): the by-hand stages' own store, shared by
   every bundle you unpack from it, as containerd's content store is shared
   by every container on a node (each node's runtime has its own, in
   <state-dir>/nodes/NAME/content). Every blob goes to
   a temporary file in content/ingest/, its size and sha256 are checked
   against the digest, and only then is it renamed into blobs/: a blob that
   does not match is refused and the store stays as it was. Blobs already
   present (a base layer shared by two images) are never fetched again, so
   a re-pull of an unchanged image transfers no blob at all.

6. Name the image: index.json gets an entry for the manifest, annotated
   org.opencontainers.image.ref.name=docker.io/library/nginx:latest, so
   skopeo, umoci and crane can read the store too.

A node's images must not be able to take its runtime down, so what is read
into memory whole is bounded and checked before it is read: a manifest or
index over 4 MiB (containerd's limit) and an image config over 4 MiB
(skopeo's) are refused, "image metadata too large", naming the blob, its
size and the limit. Digests may be sha256 or sha512 (blobs/sha512/<hex>),
as the OCI image spec allows.

MIRRORS. A runtime finds a registry's mirrors as containerd does, in its
registry hosts directory (containerd's config_path, /etc/containerd/certs.d;
here <state-dir>/certs.d): <certs.d>/docker.io/hosts.toml names the hosts to
ask for docker.io images, each [host."URL"] a mirror, asked in order, then
"server", the registry itself. podlab reads the file with containerd's own
parser (core/remotes/docker/config), asks each host in turn, and adds
?ns=docker.io to each request to a mirror, so one mirror can stand in for
several registries. The image keeps its docker.io name. podlab registry
serve writes these files naming itself (podlab init writes the default
address, http://127.0.0.1:5001, when none is there): "podlab pull nginx"
then comes through the lab registry. Read one: cat <state-dir>/certs.d/docker.io/hosts.toml

--registry-mirror (or $PODLAB_REGISTRY_MIRROR) wins over the files: it sends
docker.io references to that mirror only, with no fall-back. An http://
mirror, or --insecure, allows plain HTTP.

THE KUBELET'S PULL. --pod NAME does the Pull stage of a pod as its node's
kubelet does: the kubelet does not pull, it asks the node's runtime over the
CRI (on <state-dir>/nodes/NODE/cri.sock, starting it there if nothing
answers): ImageStatus, then PullImage when the container's imagePullPolicy
says so (Always; IfNotPresent when ImageStatus has no image; Never only
asks). The runtime pulls as above into the node's content store,
<state-dir>/nodes/NODE/content, with its own --registry-mirror. Then the
kubelet records the events (Pulling, Pulled, or Failed with ErrImagePull)
and the container's imageID, from ImageStatus. podlab -v pull --pod NAME
shows each CRI call with its request and response.

Examples:
  podlab pull nginx
  podlab pull nginx --registry-mirror http://127.0.0.1:5001
  podlab pull 127.0.0.1:5001/podlab/hello:1.0 --platform linux/arm64
  podlab pull 127.0.0.1:5001/podlab/hello@sha256:<digest>
  podlab -v pull --pod web`,
	Flags: []cli.Flag{
		&cli.StringFlag{
			Name:  "platform",
			Usage: "os/arch[/variant] to choose from an image index",
			Value: pull.HostPlatform().String(),
		},
		&cli.StringFlag{
			Name:    "registry-mirror",
			Usage:   "registry URL to pull docker.io images from (e.g. http://127.0.0.1:5001), instead of the mirrors certs.d/docker.io/hosts.toml names",
			EnvVars: []string{pull.MirrorEnv},
		},
		&cli.BoolFlag{
			Name:  "insecure",
			Usage: "allow plain HTTP and unverified TLS to the registry",
		},
		podFlag(), namespaceFlag(), containerFlag(),
	},
	Action: func(c *cli.Context) error {
		if c.String("pod") != "" {
			return runPodStage(c, kubelet.StagePull)
		}
		if c.NArg() != 1 {
			return fmt.Errorf("pull needs one image reference, e.g. `podlab pull nginx`")
		}
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		store, err := contentStore(c)
		if err != nil {
			return err
		}
		hostsDir := statedir.Layout{Dir: dir}.CertsDir()
		opts := pull.Options{
			HostsDir: hostsDir,
			Mirror:   c.String("registry-mirror"),
			Insecure: c.Bool("insecure"),
			Progress: c.App.ErrWriter,
			Bars:     pull.IsTerminal(c.App.ErrWriter),
		}
		if c.IsSet("platform") {
			opts.Platform = c.String("platform")
		}
		typed := c.Args().First()
		res, err := pull.Pull(c.Context, store, typed, opts)
		if err != nil {
			return pullHint(err, typed, hostsDir, opts.Mirror)
		}
		recordLast(c, func(r *last.Record) { r.Pulled = typed })
		printPullResult(c.App.Writer, typed, dir, res)
		return nil
	},
}

func printPullResult(w io.Writer, typed, stateDir string, res *pull.Result) {
	fmt.Fprintf(w, "Pulled %s\n", res.Reference)
	src := res.Source
	if res.Mirror != "" {
		src += fmt.Sprintf("  (mirror %s for docker.io)", res.Mirror)
	}
	fmt.Fprintf(w, "  registry   %s\n", src)
	if res.HostsFile != "" {
		fmt.Fprintf(w, "  mirrors    as %s names them\n", res.HostsFile)
	}
	if res.Index != nil {
		fmt.Fprintf(w, "  resolved   %s (%s)\n", res.Index.Digest, res.Index.MediaType)
		fmt.Fprintf(w, "  platform   %s\n", res.Index)
	} else {
		fmt.Fprintf(w, "  resolved   %s (a single image manifest, no index)\n", res.Resolved)
		if res.Platform != "" {
			fmt.Fprintf(w, "  platform   %s (from the image's config)\n", res.Platform)
		}
	}
	state := func(b pull.Blob) string {
		if b.Downloaded {
			return "downloaded"
		}
		return "already present"
	}
	fmt.Fprintf(w, "  manifest   %s  %s  %s  %s\n", res.Manifest.Digest, res.Manifest.MediaType, units.HumanSize(res.Manifest.Size), state(res.Manifest))
	fmt.Fprintf(w, "  config     %s  %s  %s  %s\n", res.Config.Digest, res.Config.MediaType, units.HumanSize(res.Config.Size), state(res.Config))
	var size int64 = res.Config.Size
	for i, l := range res.Layers {
		fmt.Fprintf(w, "  layer %-4d %s  %s  %s  %s\n", i+1, l.Digest, l.MediaType, units.HumanSize(l.Size), state(l))
		size += l.Size
	}
	if res.UpToDate {
		fmt.Fprintf(w, "  Every blob was already in the store and the registry still resolves the tag to the\n"+
			"  same digest: the runtime asked only for the digest (HEAD) and transferred no blob.\n")
	} else {
		fmt.Fprintf(w, "  downloaded %s; every blob's size and sha256 matched its digest\n", units.HumanSize(res.Downloaded))
	}

	fmt.Fprintf(w, "\nContent store (one OCI image layout, the by-hand stages' own; each node's runtime has its own): %s\n", res.StoreDir)
	fmt.Fprintf(w, "  %s  names the image %q\n", res.IndexPath, res.Reference)
	for _, b := range append([]pull.Blob{res.Manifest, res.Config}, res.Layers...) {
		fmt.Fprintf(w, "  %s  %s\n", b.Path, b.Kind)
	}

	fmt.Fprintf(w, "\nKubernetes: the kubelet would record the event (reason Pulled):\n")
	fmt.Fprintf(w, "  Successfully pulled image %q in %s. Image size: %d bytes.\n", typed, res.Duration.Round(time.Millisecond), size)
	fmt.Fprintf(w, "\nNext: podlab unpack   (or in full: podlab unpack %s --bundle %s)\n", typed, defaultBundle(stateDir, res.Reference))
}

// pullHint adds what to do to a pull that reached no registry: start the
// lab registry, which the registry hosts file names as the mirror.
func pullHint(err error, typed, hostsDir, mirror string) error {
	if !errors.Is(err, pull.ErrRegistryUnreachable) {
		return err
	}
	r, perr := pull.ParseReference(typed)
	if perr != nil || mirror != "" {
		return fmt.Errorf("%w\n  is the mirror running? Start the lab registry in a terminal of its own: podlab registry serve", err)
	}
	file := pull.HostsFile(hostsDir, r.Registry)
	if !pathExists(file) {
		if !r.IsDockerHub() && r.Registry != "registry.k8s.io" {
			return err
		}
		return fmt.Errorf("%w\n  no mirror is configured for %s: %s does not exist.\n"+
			"  Start the lab registry, which writes it naming itself: podlab registry serve\n"+
			"  (or run podlab init, or give --registry-mirror http://127.0.0.1:5001)", err, r.Registry, file)
	}
	return fmt.Errorf("%w\n  Start the lab registry, the mirror %s names, in a terminal of its own: podlab registry serve", err, file)
}

// defaultBundle is where podlab suggests, and unpack defaults, a bundle for
// ref: <state-dir>/bundles/<name>.
func defaultBundle(stateDir, ref string) string {
	return statedir.Layout{Dir: stateDir}.Bundle(bundleName(ref))
}

// bundleName suggests a bundle directory name from a reference:
// docker.io/library/nginx:latest -> nginx.
func bundleName(ref string) string {
	r, err := pull.ParseReference(ref)
	if err != nil {
		return "image"
	}
	return strings.ReplaceAll(path.Base(r.Repository), ".", "-")
}
