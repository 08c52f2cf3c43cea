// Command build builds podlab's demo images into one OCI image layout:
//
//	go run ./images/build --out DIR [--cache DIR]
//
// It compiles the hello program, downloads Debian's nginx packages into the
// cache (when not there yet), compiles Kubernetes' pause.c with gcc -static,
// assembles podlab/hello:1.0, library/nginx:latest and pause:3.10.2, and
// writes them into the layout at DIR, named by
// org.opencontainers.image.ref.name annotations. Running it again replaces
// the images; it never duplicates them. `make images` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/podlab/podlab/images"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "images/build: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("build", flag.ContinueOnError)
	flags.SetOutput(stderr)
	out := flags.String("out", "", "the OCI image layout to write the demo images into (created if absent)")
	cache := flags.String("cache", "", "where to keep downloaded .deb files (default: <out>/../cache/debs)")
	module := flags.String("module", ".", "the podlab module directory (the hello program's source is in images/hello)")
	quiet := flags.Bool("quiet", false, "print only what was built, not each step")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *out == "" || flags.NArg() > 0 {
		flags.Usage()
		return fmt.Errorf("usage: go run ./images/build --out DIR [--cache DIR]")
	}
	layoutDir, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	if *cache == "" {
		*cache = filepath.Join(filepath.Dir(layoutDir), "cache", "debs")
	}
	cacheDir, err := filepath.Abs(*cache)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := stdout
	if *quiet {
		log = io.Discard
	}
	built, err := images.BuildAll(ctx, layoutDir, images.BuildOptions{ModuleDir: *module, CacheDir: cacheDir, Log: log})
	if err != nil {
		return err
	}

	fmt.Fprintf(stdout, "\nwrote %d images into the OCI layout %s (.deb cache: %s)\n", len(built), layoutDir, cacheDir)
	for _, b := range built {
		fmt.Fprintf(stdout, "\n%s\n  digest  %s\n  size    %s in %d layers\n", b.Ref, b.Digest, human(b.Size), len(b.Layers))
		for i, l := range b.Layers {
			fmt.Fprintf(stdout, "  layer %d %s %9s  %s\n", i+1, l.Digest.Hex[:12], human(l.Size), l.CreatedBy)
		}
	}
	fmt.Fprintf(stdout, "\nserve them with: podlab registry serve --images %s\n", layoutDir)
	return nil
}

func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}
