package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/pull"
	"github.com/podlab/podlab/steps/unpack"
)

// image is one image of the node's content store as the CRI sees it: its
// id is its config's digest (as containerd's), its names the references
// stored for it.
type image struct {
	id          string // sha256:<config digest>
	name        string // a stored reference, to read it by
	repoTags    []string
	repoDigests []string
	size        uint64
	config      *v1.ConfigFile
}

func (im *image) repoDigest() string {
	if len(im.repoDigests) > 0 {
		return im.repoDigests[0]
	}
	return ""
}

// imageCache is what images and findImage read from the content store,
// kept while its index.json is the same file (the store replaces it,
// renamed over, on every change; the blobs it names never change): each
// ImageStatus read the index, every manifest and config again.
type imageCache struct {
	mu    sync.Mutex
	stamp string
	list  []*image
	byRef map[string]string // a reference findImage resolved: the image's id
}

func (s *Server) imageCache() *imageCache { return &s.imgs }

// indexStamp names the store's index.json as it is now: "" when unreadable.
func (s *Server) indexStamp() string {
	fi, err := os.Stat(filepath.Join(s.store.Dir(), "index.json"))
	if err != nil {
		return ""
	}
	ino := uint64(0)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("%d/%d/%d", ino, fi.ModTime().UnixNano(), fi.Size())
}

// images reads the content store's images, grouped by id (again only
// when its index changed).
func (s *Server) images() ([]*image, error) {
	c := s.imageCache()
	stamp := s.indexStamp()
	c.mu.Lock()
	if stamp != "" && stamp == c.stamp {
		defer c.mu.Unlock()
		return c.list, nil
	}
	c.mu.Unlock()
	out, err := s.readImages()
	if err != nil || stamp == "" {
		return out, err
	}
	c.mu.Lock()
	if c.stamp != stamp {
		c.byRef = map[string]string{}
	}
	c.stamp, c.list = stamp, out
	c.mu.Unlock()
	return out, nil
}

// readImages reads the content store's images, grouped by id.
func (s *Server) readImages() ([]*image, error) {
	list, err := s.store.List()
	if err != nil {
		return nil, err
	}
	var out []*image
	byID := map[string]*image{}
	for _, sum := range list {
		if sum.Reference == "" {
			continue
		}
		d, err := s.store.Inspect(sum.Reference)
		if err != nil {
			continue // an index or another tool's entry
		}
		id := d.Config.Digest.String()
		im, ok := byID[id]
		if !ok {
			im = &image{id: id, name: sum.Reference, size: uint64(sum.Size), config: d.ConfigJSON}
			byID[id] = im
			out = append(out, im)
		}
		ref, err := pull.ParseReference(sum.Reference)
		if err != nil {
			continue
		}
		repo := ref.Registry + "/" + ref.Repository
		if ref.Tag != "" {
			im.repoTags = append(im.repoTags, repo+":"+ref.Tag)
		}
		digest := d.Resolved
		if digest == "" {
			digest = sum.Digest.String()
		}
		im.repoDigests = append(im.repoDigests, repo+"@"+digest)
	}
	return out, nil
}

// findImage finds an image by id (sha256:..., or a unique prefix of its
// hex), or by any reference to it (nginx, docker.io/library/nginx:latest,
// repo@sha256:...). Not found is gRPC NotFound.
func (s *Server) findImage(ref string) (*image, error) {
	ims, err := s.images()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading the content store: %v", err)
	}
	var byPrefix []*image
	for _, im := range ims {
		hex := strings.TrimPrefix(im.id, "sha256:")
		switch {
		case im.id == ref:
			return im, nil
		case strings.HasPrefix(ref, "sha256:") && strings.HasPrefix(im.id, ref),
			len(ref) >= 6 && isHex(ref) && strings.HasPrefix(hex, ref):
			byPrefix = append(byPrefix, im)
		}
	}
	if len(byPrefix) == 1 {
		return byPrefix[0], nil
	}
	c := s.imageCache()
	stamp := s.indexStamp()
	c.mu.Lock()
	id, ok := c.byRef[ref]
	ok = ok && stamp != "" && stamp == c.stamp
	c.mu.Unlock()
	if ok {
		for _, im := range ims {
			if im.id == id {
				return im, nil
			}
		}
	}
	d, err := s.store.Inspect(ref)
	if err != nil {
		if errors.Is(err, pull.ErrImageNotFound) || errors.Is(err, pull.ErrBadReference) {
			return nil, status.Errorf(codes.NotFound, "failed to resolve image %q: not found in %s (pull it first: crictl pull %s)", ref, s.store.Dir(), ref)
		}
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	for _, im := range ims {
		if im.id == d.Config.Digest.String() {
			c.mu.Lock()
			if stamp != "" && stamp == c.stamp {
				c.byRef[ref] = im.id
			}
			c.mu.Unlock()
			return im, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "failed to resolve image %q: not found", ref)
}

func (im *image) cri() *runtimeapi.Image {
	out := &runtimeapi.Image{Id: im.id, RepoTags: slices.Clone(im.repoTags), RepoDigests: slices.Clone(im.repoDigests), Size: im.size,
		Spec: &runtimeapi.ImageSpec{Image: im.id}}
	if im.config != nil {
		user, _, _ := strings.Cut(im.config.Config.User, ":")
		if n, ok := parseUID(user); ok {
			out.Uid = &runtimeapi.Int64Value{Value: n}
		} else {
			out.Username = user
		}
	}
	return out
}

func parseUID(s string) (int64, bool) {
	if s == "" {
		return 0, true
	}
	var n int64
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
		n = n*10 + int64(r-'0')
	}
	return n, true
}

// PullImage pulls through steps/pull into the node's content store, and
// answers the image's id. A registry's hosts are those its hosts.toml in
// the state directory's registry hosts directory names (hostsDir), read on
// every pull as containerd's CRI plugin reads its config_path: the same
// files podlab pull and the lab containerd read, on every node.
func (s *Server) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "PullImage: no image named")
	}
	opts := pull.Options{HostsDir: s.hostsDir(), Mirror: s.cfg.Mirror, Insecure: s.cfg.Insecure}
	if _, err := pull.Pull(ctx, s.store, ref, opts); err != nil {
		if errors.Is(err, pull.ErrBadReference) {
			return nil, status.Errorf(codes.InvalidArgument, "failed to pull image %q: %v", ref, err)
		}
		return nil, status.Errorf(codes.Unknown, "failed to pull and unpack image %q: %v", ref, err)
	}
	im, err := s.findImage(ref)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PullImageResponse{ImageRef: im.id}, nil
}

// hostsDir is the registry hosts directory the runtime pulls by: the
// state directory's certs.d (statedir.Layout.CertsDir), containerd's
// config_path.
func (s *Server) hostsDir() string { return s.node.State().CertsDir() }

// ListImages lists the content store's images.
func (s *Server) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	ims, err := s.images()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading the content store: %v", err)
	}
	resp := &runtimeapi.ListImagesResponse{}
	want := req.GetFilter().GetImage().GetImage()
	var only *image
	if want != "" {
		if only, err = s.findImage(want); err != nil {
			return resp, nil
		}
	}
	for _, im := range ims {
		if only == nil || only.id == im.id {
			resp.Images = append(resp.Images, im.cri())
		}
	}
	return resp, nil
}

// ImageStatus is an image's entry, or no image (not an error: the CRI says
// a missing image answers an empty status).
func (s *Server) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	im, err := s.findImage(req.GetImage().GetImage())
	if status.Code(err) == codes.NotFound {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.ImageStatusResponse{Image: im.cri()}
	if req.Verbose {
		resp.Info = map[string]string{"info": `{"store":"` + s.store.Dir() + `","name":"` + im.name + `"}`}
	}
	return resp, nil
}

// RemoveImage removes every name of the image from the content store, and
// the blobs nothing else uses. A missing image is not an error.
func (s *Server) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	im, err := s.findImage(req.GetImage().GetImage())
	if status.Code(err) == codes.NotFound {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range append(append([]string{}, im.repoTags...), im.repoDigests...) {
		if _, err := s.store.Remove(t); err != nil && !errors.Is(err, pull.ErrImageNotFound) {
			return nil, status.Errorf(codes.Unknown, "failed to delete image %q: %v", im.id, err)
		}
	}
	removed, err := s.gcSnapshots()
	if err != nil {
		return nil, status.Errorf(codes.Unknown, "image %q deleted, but removing its snapshots failed: %v", im.id, err)
	}
	for _, sn := range removed {
		s.note("RemoveImage %s: removed snapshot %d (%s): no stored image uses it", im.id, sn.ID, sn.Name)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// gcSnapshots removes the overlayfs snapshots no stored image uses and no
// container's rootfs stands on, as containerd's garbage collector removes
// the snapshots of a deleted image.
func (s *Server) gcSnapshots() ([]unpack.Snapshot, error) {
	if name, _, err := s.Snapshotter(); err != nil || name != unpack.Overlayfs {
		return nil, err
	}
	imgs, err := s.store.Images()
	if err != nil {
		return nil, err
	}
	keep, err := unpack.KeepImages(imgs)
	if err != nil {
		return nil, err
	}
	return s.snap.snaps.GC(keep)
}

// ImageFsInfo is the content store's file system: the bytes and inodes
// under it.
func (s *Server) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	used, inodes := dirUsage(s.store.Dir())
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp:  time.Now().UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: s.store.Dir()},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: inodes},
	}}}, nil
}

func isHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef") == ""
}
