// Package subpath opens a path inside a volume without ever leaving it, and
// bind-mounts what it opened onto a path the kubelet owns: the kubelet's
// safe subPath (Kubernetes' pkg/volume/util/subpath), for a volumeMount's
// subPath and for the directories the kubelet makes for its volumes.
//
// # Why text checks are not enough (CVE-2017-1002101)
//
// A volume is shared: every container that mounts an emptyDir can write
// in it, and so can make a symlink there, `ln -s / /vol/evil`. A kubelet
// that checks subPath as text ("relative, no ..") and hands the runtime
// <volume>/evil as a bind mount's source lets the runtime resolve that
// path on the host, where evil leads to the host's /: the next container
// that mounts `subPath: evil` has the node's root file system, whatever
// PodSecurity said about the pod. Checking the path with stat or
// EvalSymlinks first does not help either: between the check and the
// mount, a container can swap a directory for a symlink.
//
// # What this package does instead
//
//  1. Open resolves the subPath component by component inside the volume
//     with openat2(2) and RESOLVE_BENEATH: a symlink may lead anywhere
//     inside the volume, but one that is absolute, or whose .. climbs above
//     the volume, is refused (EXDEV, ErrEscape), as is a path through a
//     file (ENOTDIR). What it returns is an open file descriptor: the
//     object itself, not a name that can be swapped afterwards.
//  2. Bind bind-mounts that descriptor, through its /proc/self/fd/N magic
//     link, onto a target the kubelet owns
//     (<pod dir>/volume-subpaths/<volume>/<container>/<index>), and the
//     runtime is given the target as the mount's source. Nothing a
//     container does to names inside the volume after that changes what is
//     mounted there.
//  3. MkdirAll makes missing directories inside a root the same way
//     (mkdirat(2) in a directory opened beneath the root), for a subPath
//     that does not exist yet and for the kubelet's own volume directories.
//  4. Clean unmounts every mount under a directory, deepest first, and only
//     then removes it: removing a directory tree that still has a volume,
//     or the host's /, bind-mounted inside it would remove their files.
//
// openat2 needs Linux 5.6 or later.
package subpath
