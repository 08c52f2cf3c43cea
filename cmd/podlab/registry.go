package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/containerd"
	"github.com/podlab/podlab/steps/registry"
	"github.com/podlab/podlab/steps/statedir"
)

var registryCommand = &cli.Command{
	Name:  "registry",
	Usage: "the image registry the container runtime pulls from (step 9)",
	Description: `Step 9 of creating a Pod: the container runtime finds the image registry
and downloads the image. "podlab registry serve" runs that registry on this
machine, so that no step of the lab needs Docker Hub.`,
	Subcommands: []*cli.Command{registryServeCommand},
}

var registryServeCommand = &cli.Command{
	Name:      "serve",
	Usage:     "serve the demo images over the OCI distribution API until interrupted",
	ArgsUsage: "[--addr 127.0.0.1:5001] [--images DIR]",
	Description: `A registry is an HTTP server that speaks the OCI distribution API. A runtime
pulling an image asks it, in order:

  GET /v2/                                    are you a registry? (and how do I log in)
  GET /v2/<name>/manifests/<tag or digest>    the image's manifest: its config
                                              and layers, each named by digest
  GET /v2/<name>/blobs/<digest>               the config, then each layer

A tag ("latest") is a movable pointer to a manifest; a digest (sha256:...)
names exact bytes, so a blob is fetched by digest and checked against it.
Pushing is the same API in the other direction (POST and PUT under
/v2/<name>/blobs/uploads/, then PUT on the manifest).

Docker Hub (docker.io) keeps its official images under the namespace
"library/": "nginx" is short for docker.io/library/nginx:latest. A MIRROR is
a registry that answers for another one: containerd sends a pull of
docker.io/library/nginx to a mirror as GET /v2/library/nginx/manifests/latest
on the mirror's address, and the image keeps its docker.io name.

This registry is go-containerregistry's, with blobs on disk in
<state-dir>/registry/sha256/<hex> and manifests in memory. On start it loads
every image of the OCI layout --images (by default <state-dir>/demo-images,
which "make images" builds: library/nginx:latest and podlab/hello:1.0) by
pushing them to itself over a private loopback port; blobs already on disk
are not sent again. Until the last image is loaded, every request on --addr
gets 503 UNAVAILABLE with Retry-After, as a registry that is starting answers:
GET /v2/ is the probe clients wait on, so once it answers 200 every tag is
there. Then it logs every request it answers, one line each (--debug also
logs the pushes of the start).

Once ready it names itself the mirror of docker.io and registry.k8s.io, as
containerd's registry hosts directory (config_path) does: it writes
<state-dir>/certs.d/docker.io/hosts.toml and certs.d/registry.k8s.io/hosts.toml
("server" the upstream, [host."http://ADDR"] the mirror, asked first). podlab
pull reads them with containerd's own parser, so "podlab pull nginx" comes
here, and so do every node's runtime (podlab runtime, which the kubelet
starts) and a containerd whose config_path is <state-dir>/certs.d.

A lab of machines (podlab node join) reaches the host only at the lab
network's gateway: a registry on 127.0.0.1 is out of the machines' reach
(their 127.0.0.1 is their own). Listen on the gateway, which the first
join puts on the lab bridge, and hosts.toml names it there, for the host
and the machines alike:

  podlab registry serve --addr GATEWAY:5001     (GATEWAY: podlab init says it)

Examples:
  make images
  podlab registry serve
  podlab pull nginx
  podlab pull 127.0.0.1:5001/podlab/hello:1.0
  cat $PODLAB_STATE_DIR/certs.d/docker.io/hosts.toml
  curl http://127.0.0.1:5001/v2/_catalog`,
	Flags: []cli.Flag{
		&cli.StringFlag{
			Name:  "addr",
			Usage: "address to listen on (host:port; :0 picks a free port)",
			Value: "127.0.0.1:5001",
		},
		&cli.StringFlag{
			Name:        "images",
			Usage:       "OCI image layout whose named images the registry serves",
			DefaultText: "<state-dir>/demo-images",
		},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() != 0 {
			return fmt.Errorf("registry serve takes no arguments, got %q", c.Args().Slice())
		}
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		images := c.String("images")
		if images == "" {
			images = registry.ImagesDir(dir)
		}
		if images, err = filepath.Abs(images); err != nil {
			return err
		}
		ln, err := registry.Listen(c.String("addr"))
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		defer stop()
		w := c.App.Writer
		opts := registry.Options{BlobDir: registry.BlobDir(dir), Log: w, LogLoads: c.Bool("debug")}
		certs := statedir.Layout{Dir: dir}.CertsDir()
		err = registry.Run(ctx, ln, images, opts, func(loaded []registry.Loaded) {
			mirror := mirrorURL(ln.Addr())
			hosts, herr := containerd.WriteHosts(certs, mirror)
			printRegistryReady(w, ln.Addr().String(), opts.BlobDir, images, loaded, hosts, herr)
		})
		if err != nil {
			return err
		}
		fmt.Fprintln(w, "registry stopped (its manifests were in memory; the blobs stay on disk)")
		return nil
	},
}

// mirrorURL is the URL clients on this machine reach the registry at:
// http://<addr>, with 127.0.0.1 for an address on every interface.
func mirrorURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func printRegistryReady(w io.Writer, addr, blobDir, images string, loaded []registry.Loaded, hosts []string, hostsErr error) {
	fmt.Fprintf(w, "Registry listening on http://%s (the OCI distribution API, under /v2/)\n", addr)
	fmt.Fprintf(w, "  blobs      %s/sha256/<hex>  (on disk)\n", blobDir)
	fmt.Fprintf(w, "  manifests  in memory, loaded from the OCI layout %s\n", images)
	fmt.Fprintln(w, "\nImages it serves:")
	for _, l := range loaded {
		sent := fmt.Sprintf("%d of %d blobs uploaded", len(l.Uploaded), l.Blobs)
		if len(l.Uploaded) == 0 {
			sent = fmt.Sprintf("all %d blobs already on disk", l.Blobs)
		}
		repo, tag, _ := strings.Cut(l.Ref, ":")
		fmt.Fprintf(w, "  %-22s %s  (%s)\n", l.Ref, l.Digest, sent)
		fmt.Fprintf(w, "  %-22s GET http://%s/v2/%s/manifests/%s\n", "", addr, repo, tag)
	}
	if hostsErr != nil {
		fmt.Fprintf(w, "\nwarning: %v (podlab pull needs --registry-mirror http://%s)\n", hostsErr, addr)
	} else {
		fmt.Fprintln(w, "\nThe mirror of docker.io and registry.k8s.io, as containerd's config_path reads it")
		fmt.Fprintln(w, "(podlab pull and podlab containerd read these files):")
		for _, h := range hosts {
			fmt.Fprintf(w, "  %s\n", h)
		}
	}
	fmt.Fprintln(w, "\nPull through it, from another terminal:")
	for _, l := range loaded {
		if repo, ok := strings.CutPrefix(l.Ref, "library/"); ok {
			short := strings.TrimSuffix(repo, ":latest")
			fmt.Fprintf(w, "  podlab pull %-26s # docker.io/%s, through the mirror hosts.toml names\n", short, l.Ref)
		} else {
			fmt.Fprintf(w, "  podlab pull %s/%s\n", addr, l.Ref)
		}
	}
	fmt.Fprintf(w, "  curl http://%s/v2/_catalog\n", addr)
	fmt.Fprintln(w, "\nServing until Ctrl-C. Requests (time, method, path, status, size):")
}
