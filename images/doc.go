// Package images holds the recipes of podlab's demo images, built locally
// with go-containerregistry, so that no step of the lab needs Docker Hub:
//
//   - podlab/hello:1.0 (Hello): a static Go program that reports what a
//     container sees (hostname, PID, user, cgroup limits) and serves it over
//     HTTP; its layers also carry the lesson of unpacking, with a whiteout and
//     an opaque whiteout;
//   - library/nginx:latest (Nginx): a real nginx from Debian's packages and
//     the shared libraries it needs;
//   - pause:3.10.2 (Pause): Kubernetes' own pause program (pause/pause.c,
//     from k8s.io/kubernetes v1.37.2), compiled with gcc -static: the
//     sandbox image a CRI runtime (the lab containerd) runs first in every
//     pod, served by the lab registry as registry.k8s.io/pause:3.10.2.
//
// An image is a manifest naming a config and an ordered list of layers, each
// a gzip-compressed tar. The recipes build them as a Dockerfile would, one
// layer per step, and record each step in the config's history. Every file is
// dated EpochUnix and owned by root, so the same inputs give the same digests.
//
// BuildAll writes every demo image into one OCI image layout (what `make
// images` runs, through images/build); the local registry
// (steps/registry) serves that layout.
package images
