package pull

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"
)

// DefaultParallel is how many blobs download at once, as containerd's
// max_concurrent_downloads defaults to 3.
const DefaultParallel = 3

// MirrorEnv is the environment variable the command reads a Docker Hub
// mirror from, like --registry-mirror.
const MirrorEnv = "PODLAB_REGISTRY_MIRROR"

// Options tune a pull. The zero value pulls for this host's platform from
// the registry the reference names, with ~/.docker/config.json credentials.
type Options struct {
	// Platform is "os/arch[/variant]" to choose from an image index; empty
	// means this host's platform (HostPlatform).
	Platform string
	// Mirror is a registry URL that docker.io references are pulled from
	// instead, as a containerd hosts.toml mirror: "http://127.0.0.1:5001"
	// or "https://mirror.example". The repository path stays
	// (library/nginx), and the image is stored under its docker.io name.
	// An http:// URL means plain HTTP.
	Mirror string
	// Insecure allows plain HTTP to the registry, and TLS without
	// certificate verification.
	Insecure bool
	// Keychain finds credentials; nil means authn.DefaultKeychain
	// (~/.docker/config.json and its credential helpers).
	Keychain authn.Keychain
	// HostsDir is a registry hosts directory, as containerd's config_path
	// (/etc/containerd/certs.d): when <HostsDir>/<registry>/hosts.toml
	// exists, the hosts it names (its mirrors, then its server) are tried in
	// order, as containerd tries them. Mirror, when set, wins over it.
	HostsDir string
	// Transport carries the HTTP requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Parallel is how many blobs download at once; 0 means DefaultParallel.
	Parallel int
	// Progress receives download progress; nil shows none.
	Progress io.Writer
	// Bars draws a progress bar per blob (for a terminal, see IsTerminal)
	// instead of one line per blob.
	Bars bool
}

// Blob is one blob of a pulled image and where it is on disk.
type Blob struct {
	// Kind is "manifest", "config" or "layer".
	Kind      string
	Digest    v1.Hash
	MediaType types.MediaType
	Size      int64
	// Path is the blob's absolute path in the content store.
	Path string
	// Downloaded is true when this pull fetched it, false when it was
	// already present (shared with an image pulled before).
	Downloaded bool
}

// Result tells what a pull did.
type Result struct {
	// Reference is the normalized reference the image is stored under,
	// e.g. "docker.io/library/nginx:latest".
	Reference string
	// Source is the repository the image was fetched from, e.g.
	// "index.docker.io/library/nginx" or, through a mirror,
	// "127.0.0.1:5000/library/nginx".
	Source string
	// Mirror is the mirror URL used, or "".
	Mirror string
	// HostsFile is the hosts.toml that named the hosts tried, or "".
	HostsFile string
	// Resolved is the digest the registry resolved the reference to: the
	// index's when it is an index, else the manifest's.
	Resolved v1.Hash
	// Index is set when the reference named an image index.
	Index *IndexChoice
	// Platform is the platform of the stored image ("" when its config does
	// not say).
	Platform string
	Manifest Blob
	Config   Blob
	Layers   []Blob
	// UpToDate is true when every blob was already stored and the registry
	// still resolves the reference to the same digest: only the manifest's
	// digest was asked for.
	UpToDate bool
	// Downloaded is the number of blob bytes fetched.
	Downloaded int64
	// StoreDir and IndexPath are the content store's layout and index.json.
	StoreDir  string
	IndexPath string
	Duration  time.Duration
}

// Pull resolves ref at its registry (or the Docker Hub mirror), chooses the
// manifest for the platform, and stores manifest, config and layers in
// store, each verified against its digest before it enters the store.
func Pull(ctx context.Context, store *Store, ref string, opts Options) (*Result, error) {
	began := time.Now()
	var nameOpts []name.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	r, err := ParseReference(ref, nameOpts...)
	if err != nil {
		return nil, err
	}
	want, explicit := HostPlatform(), false
	if opts.Platform != "" {
		if want, err = ParsePlatform(opts.Platform); err != nil {
			return nil, err
		}
		explicit = true
	}
	res := &Result{Reference: r.String(), StoreDir: store.Dir(), IndexPath: store.IndexPath()}
	sources := []source{{repo: r.Name().Context()}}
	if opts.Mirror != "" && r.IsDockerHub() {
		src, err := mirrorRepository(opts.Mirror, r.Repository, opts.Insecure)
		if err != nil {
			return nil, err
		}
		sources = []source{{repo: src, mirror: opts.Mirror}}
	} else if hs, file, err := hostSources(ctx, opts.HostsDir, r, opts.Insecure); err != nil {
		return nil, fmt.Errorf("pulling %s: %w", r, err)
	} else if hs != nil {
		sources, res.HostsFile = hs, file
	}
	keychain, base := opts.Keychain, opts.Transport
	if keychain == nil {
		keychain = authn.DefaultKeychain
	}
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		if opts.Insecure {
			t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // what --insecure asks for
		}
		base = t
	}

	// Pulls share the store; rmi waits for them before deleting blobs.
	unlock, err := store.lock(gcLockFile, unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()

	// Resolve: which manifest does the tag name now? A HEAD request answers
	// with its digest only. If that is what is stored, nothing is fetched.
	// Each source is asked in turn (the mirrors of hosts.toml, then the
	// registry), as containerd's resolver does; the first that answers is
	// pulled from.
	id := r.Identifier()
	client, head, headOK, err := resolveFirst(ctx, sources, id, keychain, base, res)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", r, err)
	}
	if headOK && head.Size > MaxManifestSize {
		return nil, fmt.Errorf("pulling %s: %w", r, tooLarge(manifestKind(head.MediaType), head.Digest, head.Size, MaxManifestSize))
	}
	if headOK {
		if ok, err := store.upToDate(r.String(), head.Digest, want, res); err != nil {
			return nil, err
		} else if ok {
			res.Duration = time.Since(began)
			return res, nil
		}
		id = head.Digest.String() // GET exactly what HEAD saw
	}

	body, desc, err := client.manifest(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", r, err)
	}
	if r.Digest != "" && desc.Digest.String() != r.Digest {
		return nil, fmt.Errorf("pulling %s: %w: expected %s, got %s", r, ErrDigestMismatch, r.Digest, desc.Digest)
	}
	res.Resolved = desc.Digest
	if isIndex(desc.MediaType) {
		if body, desc, err = res.chooseFromIndex(ctx, client, body, desc, want, explicit); err != nil {
			return nil, fmt.Errorf("pulling %s: %w", r, err)
		}
	}
	if !isImageManifest(desc.MediaType) {
		return nil, fmt.Errorf("pulling %s: %w %q (podlab pulls OCI and Docker schema 2 images)", r, ErrUnsupportedMediaType, desc.MediaType)
	}
	m, err := v1.ParseManifest(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("pulling %s: reading manifest %s: %w", r, desc.Digest, err)
	}
	if m.Config.Size > MaxConfigSize {
		return nil, fmt.Errorf("pulling %s: %w", r, tooLarge("config", m.Config.Digest, m.Config.Size, MaxConfigSize))
	}
	for _, b := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if _, err := hasherFor(b.Digest); err != nil {
			return nil, fmt.Errorf("pulling %s: manifest %s: %w", r, desc.Digest, err)
		}
	}

	// Download the config first (it says the image's platform), then the
	// layers, a few at a time. Each blob is verified into ingest/ and waits
	// there until every blob of the image is verified: a failed pull adds
	// nothing to blobs/.
	res.Manifest = store.blobFor("manifest", desc)
	res.Config = store.blobFor("config", m.Config)
	for _, l := range m.Layers {
		res.Layers = append(res.Layers, store.blobFor("layer", l))
	}
	st := newStaging(store)
	defer st.discard()
	prog := newProgress(opts.Progress, opts.Bars)
	err = st.fetchAll(ctx, client, []*Blob{&res.Config}, 1, prog)
	var platform v1.Platform
	if err == nil {
		platform, err = res.platformOf(st.path(m.Config.Digest))
		if err == nil && explicit && platform.OS != "" && res.Index == nil && !platformMatches(want, platform) {
			err = fmt.Errorf("%w: the image is a single manifest for %s, not %s",
				ErrNoMatchingPlatform, platformString(platform), platformString(want))
		}
	}
	if err == nil {
		layers := make([]*Blob, len(res.Layers))
		for i := range res.Layers {
			layers[i] = &res.Layers[i]
		}
		err = st.fetchAll(ctx, client, layers, opts.Parallel, prog)
	}
	prog.wait()
	if err == nil && !store.Has(desc.Digest) {
		err = st.stage(ctx, &res.Manifest, bytes.NewReader(body), nil)
	}
	if err == nil {
		err = st.commit()
	}
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", r, err)
	}
	for _, b := range append([]Blob{res.Config}, res.Layers...) {
		if b.Downloaded {
			res.Downloaded += b.Size
		}
	}

	// index.json names the image last: it appears in the store whole or
	// not at all.
	stored := v1.Descriptor{MediaType: desc.MediaType, Size: desc.Size, Digest: desc.Digest,
		Annotations: map[string]string{
			AnnotationRefName:        r.String(),
			AnnotationContainerdName: r.String(),
			AnnotationResolvedDigest: res.Resolved.String(),
		}}
	if platform.OS != "" {
		stored.Platform = &platform
		res.Platform = platformString(platform)
	}
	if err := store.name(stored); err != nil {
		return nil, fmt.Errorf("pulling %s: %w", r, err)
	}
	res.Duration = time.Since(began)
	return res, nil
}

// chooseFromIndex picks the manifest for want from the index body (digest
// desc) and fetches it. An entry for the platform that is itself an index
// is followed, as containerd's platform matcher does, at most MaxIndexDepth
// indexes deep. It fills res.Index with the top index and the choice.
func (res *Result) chooseFromIndex(ctx context.Context, client *registryClient, body []byte, desc v1.Descriptor,
	want v1.Platform, explicit bool) ([]byte, v1.Descriptor, error) {
	var parent v1.Hash // the index whose entry desc is, once nested
	for depth := 1; ; depth++ {
		idx, err := v1.ParseIndexManifest(bytes.NewReader(body))
		if err != nil {
			return nil, v1.Descriptor{}, fmt.Errorf("reading index %s: %w", desc.Digest, err)
		}
		chosen, reason, available, err := chooseManifest(idx, want, explicit)
		if err != nil {
			if depth > 1 {
				err = fmt.Errorf("nested index %s (the %s entry of index %s): %w", desc.Digest, platformString(want), parent, err)
			}
			return nil, v1.Descriptor{}, err
		}
		if res.Index == nil {
			res.Index = &IndexChoice{Digest: desc.Digest, MediaType: desc.MediaType, Manifests: len(idx.Manifests), Platforms: available}
		}
		res.Index.Chosen, res.Index.Reason = chosen, reason
		if chosen.Size > MaxManifestSize {
			return nil, v1.Descriptor{}, tooLarge(manifestKind(chosen.MediaType), chosen.Digest, chosen.Size, MaxManifestSize)
		}
		what := "manifest"
		if isIndex(chosen.MediaType) {
			if depth >= MaxIndexDepth {
				return nil, v1.Descriptor{}, fmt.Errorf("%w: index %s nests indexes more than %d deep for %s (the last, %s, names index %s); podlab follows at most %d, as no real image needs more",
					ErrTooLarge, res.Index.Digest, MaxIndexDepth, platformString(want), desc.Digest, chosen.Digest, MaxIndexDepth)
			}
			what = "nested index"
		}
		next, nextDesc, err := client.manifest(ctx, chosen.Digest.String())
		if err != nil {
			return nil, v1.Descriptor{}, fmt.Errorf("%s for %s: %w", what, platformString(*chosen.Platform), err)
		}
		if !isIndex(nextDesc.MediaType) {
			return next, nextDesc, nil
		}
		parent, body, desc = desc.Digest, next, nextDesc
		res.Index.Via = append(res.Index.Via, desc.Digest)
	}
}

// platformOf is the index's platform for the chosen manifest, else what the
// image's config (at configPath) says.
func (res *Result) platformOf(configPath string) (v1.Platform, error) {
	if res.Index != nil && res.Index.Chosen.Platform != nil {
		return *res.Index.Chosen.Platform, nil
	}
	b, err := os.ReadFile(configPath) // bounded: staged at the size the manifest names, at most MaxConfigSize
	if err != nil {
		return v1.Platform{}, err
	}
	// Only the platform fields: decoding the whole config (its environment,
	// history, labels) cost three times as much for a 3 MB one.
	var cfg struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Variant      string `json:"variant"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return v1.Platform{}, fmt.Errorf("reading config %s: %w", res.Config.Digest, err)
	}
	return v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}, nil
}

// mirrorRepository is where a docker.io repository is pulled from through a
// mirror: the mirror's host with the same repository path.
func mirrorRepository(mirror, repo string, insecure bool) (name.Repository, error) {
	raw := mirror
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return name.Repository{}, fmt.Errorf("invalid registry mirror %q: want a URL such as http://127.0.0.1:5001 or https://mirror.example", mirror)
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "v2" {
		return name.Repository{}, fmt.Errorf("invalid registry mirror %q: a path (%s) is not supported; give only scheme and host", mirror, u.Path)
	}
	var opts []name.Option
	switch u.Scheme {
	case "http":
		opts = append(opts, name.Insecure)
	case "https":
		if insecure {
			opts = append(opts, name.Insecure)
		}
	default:
		return name.Repository{}, fmt.Errorf("invalid registry mirror %q: scheme must be http or https", mirror)
	}
	r, err := name.NewRepository(u.Host+"/"+repo, opts...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("invalid registry mirror %q: %w", mirror, err)
	}
	return r, nil
}

func (s *Store) blobFor(kind string, d v1.Descriptor) Blob {
	return Blob{Kind: kind, Digest: d.Digest, MediaType: d.MediaType, Size: d.Size, Path: s.BlobPath(d.Digest)}
}

// upToDate reports whether ref is stored, still resolves to resolved, is
// for want, and has all its blobs: then the pull is done. It fills res from
// the stored image.
func (s *Store) upToDate(ref string, resolved v1.Hash, want v1.Platform, res *Result) (bool, error) {
	idx, err := s.readIndex()
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(idx.Manifests, func(d v1.Descriptor) bool { return d.Annotations[AnnotationRefName] == ref })
	if i < 0 {
		return false, nil
	}
	d := idx.Manifests[i]
	if d.Annotations[AnnotationResolvedDigest] != resolved.String() {
		return false, nil
	}
	if d.Platform != nil && d.Digest != resolved && !platformMatches(want, *d.Platform) {
		return false, nil
	}
	m, err := s.readManifest(d.Digest)
	if err != nil {
		return false, nil // missing or damaged: pull again
	}
	if !s.Has(m.Config.Digest) {
		return false, nil
	}
	for _, l := range m.Layers {
		if !s.Has(l.Digest) {
			return false, nil
		}
	}
	res.UpToDate = true
	res.Resolved = resolved
	res.Manifest = s.blobFor("manifest", d)
	res.Config = s.blobFor("config", m.Config)
	res.Layers = nil
	for _, l := range m.Layers {
		res.Layers = append(res.Layers, s.blobFor("layer", l))
	}
	if d.Platform != nil {
		res.Platform = platformString(*d.Platform)
	}
	return true, nil
}

// readManifest reads the stored manifest d, refusing one larger than
// MaxManifestSize before reading it.
func (s *Store) readManifest(d v1.Hash) (*v1.Manifest, error) {
	f, err := s.openBounded("manifest", d, MaxManifestSize)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return v1.ParseManifest(f)
}

// name adds (or replaces) d's entry in index.json, keyed by its
// AnnotationRefName.
func (s *Store) name(d v1.Descriptor) error {
	ref := d.Annotations[AnnotationRefName]
	return s.updateIndex(func(idx *v1.IndexManifest) error {
		idx.Manifests = slices.DeleteFunc(idx.Manifests, func(e v1.Descriptor) bool {
			return e.Annotations[AnnotationRefName] == ref
		})
		idx.Manifests = append(idx.Manifests, d)
		return nil
	})
}

// staging holds the verified blobs of one pull in the ingest directory
// until every blob of the image is verified; then commit renames them into
// blobs/, and discard removes what was not committed.
type staging struct {
	store *Store
	mu    sync.Mutex
	files map[v1.Hash]string
}

func newStaging(s *Store) *staging { return &staging{store: s, files: map[v1.Hash]string{}} }

// path is where blob d can be read now: staged, or in the store.
func (st *staging) path(d v1.Hash) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	if p, ok := st.files[d]; ok {
		return p
	}
	return st.store.BlobPath(d)
}

// commit renames every staged blob into blobs/sha256/. A blob another pull
// stored meanwhile is replaced by identical bytes.
func (st *staging) commit() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	for d, p := range st.files {
		if err := os.MkdirAll(filepath.Dir(st.store.BlobPath(d)), 0o755); err != nil { // blobs/sha512/ on first use
			return fmt.Errorf("storing blob %s: %w", d, err)
		}
		if err := os.Rename(p, st.store.BlobPath(d)); err != nil {
			return fmt.Errorf("storing blob %s: %w", d, err)
		}
		delete(st.files, d)
	}
	return nil
}

func (st *staging) discard() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for d, p := range st.files {
		os.Remove(p)
		delete(st.files, d)
	}
}

// fetchAll downloads the blobs not yet stored, parallel at a time. The
// first failure cancels the others.
func (st *staging) fetchAll(ctx context.Context, c *registryClient, blobs []*Blob, parallel int, prog progress) error {
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, parallel)
	)
	first := map[v1.Hash]*Blob{}
	var dups []*Blob
	for _, b := range blobs {
		if st.store.Has(b.Digest) {
			prog.present(b.Kind, b.Digest, b.Size)
			continue
		}
		if _, ok := first[b.Digest]; ok { // the same layer twice in one image
			dups = append(dups, b)
			continue
		}
		first[b.Digest] = b
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if err := st.fetch(ctx, c, b, prog); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, b := range dups {
		b.Downloaded = first[b.Digest].Downloaded
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

func (st *staging) fetch(ctx context.Context, c *registryClient, b *Blob, prog progress) error {
	body, err := c.blob(ctx, b.Digest)
	if err != nil {
		return fmt.Errorf("%s %s: %w", b.Kind, b.Digest, err)
	}
	defer body.Close()
	t := prog.start(b.Kind, b.Digest, b.Size)
	err = st.stage(ctx, b, body, t.add)
	t.done(err)
	if err != nil {
		return fmt.Errorf("%s %s: %w", b.Kind, b.Digest, err)
	}
	return nil
}

// copyBufferSize is the chunk blobs are copied in: large, to make few
// system calls, and fixed, so memory does not grow with the layer.
const copyBufferSize = 1 << 20

// stage writes the blob r to a temporary file in the store's ingest
// directory, hashing it as it goes, and checks its size and sha256 against
// b. A blob that fails the check is deleted at once; one that passes waits
// for commit.
func (st *staging) stage(ctx context.Context, b *Blob, r io.Reader, onWrite func(int)) (err error) {
	d, size := b.Digest, b.Size
	h, err := hasherFor(d)
	if err != nil {
		return fmt.Errorf("blob %s: %w", d, err)
	}
	f, err := os.CreateTemp(filepath.Join(st.store.dir, ingestDir), d.Hex+".*.partial")
	if err != nil {
		return fmt.Errorf("storing blob %s: %w", d, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	buf := make([]byte, copyBufferSize)
	limited := io.LimitReader(r, size+1) // one byte more reveals a blob that is too long
	var written int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := io.ReadFull(limited, buf)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				return fmt.Errorf("storing blob %s: %w", d, err)
			}
			h.Write(buf[:n])
			written += int64(n)
			if onWrite != nil {
				onWrite(n)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("downloading blob %s after %d of %d bytes: %w", d, written, size, rerr)
		}
	}
	if written > size {
		return fmt.Errorf("%w: blob %s: expected %d bytes, got more; the blob was discarded", ErrSizeMismatch, d, size)
	}
	if written < size {
		return fmt.Errorf("%w: blob %s: expected %d bytes, got %d; the blob was discarded", ErrSizeMismatch, d, size, written)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != d.Hex {
		return fmt.Errorf("%w: expected %s, got %s:%s (%d bytes); the blob was discarded, the store is unchanged", ErrDigestMismatch, d, d.Algorithm, got, written)
	}
	if err := f.Chmod(0o444); err != nil {
		return fmt.Errorf("storing blob %s: %w", d, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("storing blob %s: %w", d, err)
	}
	st.mu.Lock()
	st.files[d] = f.Name()
	st.mu.Unlock()
	b.Downloaded = true
	return nil
}
