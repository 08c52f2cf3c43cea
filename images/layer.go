package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// EpochUnix is the time, in seconds since 1970, stamped on every file, layer
// history entry and config of the demo images (2024-01-01T00:00:00Z). With a
// fixed time, the same inputs give the same bytes, so the same digests: a
// build is reproducible.
const EpochUnix = 1704067200

func epoch() time.Time { return time.Unix(EpochUnix, 0).UTC() }

// WhiteoutPrefix marks a file that deletes its namesake from lower layers:
// "etc/.wh.motd" deletes /etc/motd. OpaqueWhiteout, inside a directory, hides
// everything lower layers put in that directory. (OCI image-spec, layer.md.)
const (
	WhiteoutPrefix = ".wh."
	OpaqueWhiteout = ".wh..wh..opq"
)

// entry is one file of a layer, in a tar archive.
type entry struct {
	name string // relative, no leading "/": "etc/passwd"
	typ  byte   // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	mode int64  // permission bits
	data []byte // for regular files
	link string // for symlinks
}

func dirEntry(name string, mode int64) entry { return entry{name: name, typ: tar.TypeDir, mode: mode} }
func fileEntry(name string, mode int64, data []byte) entry {
	return entry{name: name, typ: tar.TypeReg, mode: mode, data: data}
}
func textEntry(name, text string) entry { return fileEntry(name, 0o644, []byte(text)) }
func linkEntry(name, target string) entry {
	return entry{name: name, typ: tar.TypeSymlink, mode: 0o777, link: target}
}

// whiteoutEntry deletes name (a file or a directory) from the layers below.
func whiteoutEntry(name string) entry {
	return fileEntry(path.Join(path.Dir(name), WhiteoutPrefix+path.Base(name)), 0o644, nil)
}

// opaqueEntry hides what the layers below put in directory dir.
func opaqueEntry(dir string) entry { return fileEntry(path.Join(dir, OpaqueWhiteout), 0o644, nil) }

// tarLayer writes entries into an uncompressed tar, sorted by name, with every
// parent directory present (0755 unless listed) and every file owned by root
// and dated EpochUnix. Same entries, same bytes.
func tarLayer(entries []entry) ([]byte, error) {
	byName := map[string]entry{}
	for _, e := range entries {
		e.name = strings.Trim(path.Clean("/"+e.name), "/")
		if e.name == "" {
			continue
		}
		if _, dup := byName[e.name]; dup {
			return nil, fmt.Errorf("layer lists %s twice", e.name)
		}
		byName[e.name] = e
	}
	for name := range byName {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := byName[d]; !ok {
				byName[d] = dirEntry(d, 0o755)
			}
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names) // a parent sorts before its children

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		e := byName[name]
		h := &tar.Header{
			Typeflag: e.typ,
			Name:     name,
			Mode:     e.mode,
			ModTime:  epoch(),
			Linkname: e.link,
		}
		switch e.typ {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeReg:
			h.Size = int64(len(e.data))
		case tar.TypeSymlink:
		default:
			return nil, fmt.Errorf("%s: unsupported tar type %q", name, e.typ)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing %s: %w", name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// layerStep is one layer of a recipe and the history entry that explains it.
type layerStep struct {
	createdBy string // what a Dockerfile would say: "COPY hello /hello"
	comment   string // why the layer is there
	entries   []entry
}

// assemble builds an OCI image: an empty image given the OCI manifest and
// config media types, then cfg, then one gzip layer per step, each with its
// history entry.
func assemble(cfg v1.Config, steps []layerStep) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: goarch(),
		OS:           "linux",
		Created:      v1.Time{Time: epoch()},
		Config:       cfg,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, 0, len(steps))
	for _, s := range steps {
		raw, err := tarLayer(s.entries)
		if err != nil {
			return nil, fmt.Errorf("layer %q: %w", s.createdBy, err)
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(raw)), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("layer %q: %w", s.createdBy, err)
		}
		adds = append(adds, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History: v1.History{
				Created:   v1.Time{Time: epoch()},
				CreatedBy: s.createdBy,
				Comment:   s.comment,
			},
		})
	}
	return mutate.Append(img, adds...)
}

// modeBits keeps the permission, setuid, setgid and sticky bits of m in tar's
// numeric form.
func modeBits(m fs.FileMode) int64 {
	bits := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	return bits
}
