package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/internal/units"
	"github.com/podlab/podlab/steps/pull"
)

var inspectCommand = &cli.Command{
	Name:      "inspect",
	Usage:     "show a stored image's manifest, config and layers",
	ArgsUsage: "REF [--json]",
	Description: `Shows what the runtime knows about a pulled image, from the blobs in the
content store, as "crictl inspecti" does:

  MANIFEST  the table of contents, stored by its digest: the digest you can
            pull by (REF@sha256:...) names exactly these bytes.
  CONFIG    the image's JSON config: how to run it. Entrypoint and Cmd become
            the process's args (a Pod's command and args replace them), Env,
            WorkingDir and User its environment, ExposedPorts is documentation
            (a Pod's containerPort likewise). The runtime writes these into
            the bundle's config.json (step 11).
  HISTORY   how each layer was built (the Dockerfile steps).
  LAYERS    compressed tar files applied in order to build the root
            filesystem (step 10). DIGEST is the sha256 of the compressed blob
            the registry serves; DIFF_ID, listed in the config, is the sha256
            of the uncompressed tar, what a snapshotter checks after unpacking.

Every blob's path is shown: open them, they are plain JSON and tar.gz files.
--json prints the manifest and config documents themselves.`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print the manifest and config as JSON"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() != 1 {
			return fmt.Errorf("inspect needs one image reference, e.g. `podlab inspect nginx` (see `podlab images`)")
		}
		store, err := contentStore(c)
		if err != nil {
			return err
		}
		d, err := store.Inspect(c.Args().First())
		if err != nil {
			return err
		}
		if c.Bool("json") {
			enc := json.NewEncoder(c.App.Writer)
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{"reference": d.Reference, "manifest": d.ManifestJSON, "config": d.ConfigJSON})
		}
		printImageDetails(c.App.Writer, d)
		return nil
	},
}

func printImageDetails(w io.Writer, d *pull.ImageDetails) {
	fmt.Fprintf(w, "Image %s\n", d.Reference)
	if d.Resolved != "" && d.Resolved != d.Manifest.Digest.String() {
		fmt.Fprintf(w, "  resolved from index %s\n", d.Resolved)
	}
	cfg := d.ConfigJSON
	fmt.Fprintf(w, "\nManifest  %s  %s  %s\n  %s\n", d.Manifest.Digest, d.Manifest.MediaType, units.HumanSize(d.Manifest.Size), d.Manifest.Path)
	fmt.Fprintf(w, "\nConfig    %s  %s  %s\n  %s\n", d.Config.Digest, d.Config.MediaType, units.HumanSize(d.Config.Size), d.Config.Path)
	platform := cfg.OS + "/" + cfg.Architecture
	if cfg.Variant != "" {
		platform += "/" + cfg.Variant
	}
	row := func(k, v string) {
		if v == "" {
			v = "(not set)"
		}
		fmt.Fprintf(w, "  %-13s %s\n", k, v)
	}
	row("platform", strings.Trim(platform, "/"))
	row("entrypoint", jsonList(cfg.Config.Entrypoint))
	row("cmd", jsonList(cfg.Config.Cmd))
	row("workdir", cfg.Config.WorkingDir)
	row("user", cfg.Config.User)
	var ports []string
	for p := range cfg.Config.ExposedPorts {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	row("exposed ports", strings.Join(ports, ", "))
	if len(cfg.Config.Env) == 0 {
		row("env", "")
	}
	for i, e := range cfg.Config.Env {
		k := ""
		if i == 0 {
			k = "env"
		}
		fmt.Fprintf(w, "  %-13s %s\n", k, e)
	}
	if !cfg.Created.IsZero() {
		row("created", cfg.Created.UTC().Format("2006-01-02 15:04:05 MST"))
	}

	if len(cfg.History) > 0 {
		fmt.Fprintf(w, "\nHistory (%d steps; empty_layer steps change only the config)\n", len(cfg.History))
		for i, h := range cfg.History {
			mark := ""
			if h.EmptyLayer {
				mark = " (empty_layer)"
			}
			fmt.Fprintf(w, "  %2d  %s%s\n", i+1, strings.TrimSpace(h.CreatedBy), mark)
		}
	}

	var total int64
	fmt.Fprintf(w, "\nLayers (%d, applied in this order)\n", len(d.Layers))
	for i, l := range d.Layers {
		total += l.Size
		fmt.Fprintf(w, "  %2d  digest   %s  %s  %s\n", i+1, l.Digest, l.MediaType, units.HumanSize(l.Size))
		fmt.Fprintf(w, "      diff_id  %s\n", l.DiffID)
		fmt.Fprintf(w, "      %s\n", l.Path)
	}
	fmt.Fprintf(w, "\nSize: %s compressed (config + layers)\n", units.HumanSize(total+d.Config.Size))
	fmt.Fprintf(w, "Next: podlab unpack %s --bundle %s\n", d.Reference, defaultBundle(filepath.Dir(d.StoreDir), d.Reference))
}

func jsonList(s []string) string {
	if len(s) == 0 {
		return ""
	}
	b, _ := json.Marshal(s)
	return string(b)
}
