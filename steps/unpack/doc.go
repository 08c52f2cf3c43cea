// Package unpack is step 10 of the chain that creates a Pod: the container
// runtime turns a pulled image into the root filesystem of a container.
//
// An image is a stack of layers. Each layer is a tar archive (usually
// gzip- or zstd-compressed) of the changes it makes to the layers below it:
// files added or replaced, and files deleted, written as "whiteouts" — an
// empty entry named ".wh.NAME" deletes NAME, and an entry named
// ".wh..wh..opq" inside a directory (an "opaque whiteout") hides everything
// the lower layers put in that directory. Applying the layers in order, from
// the manifest's first to its last, gives the image's file system.
//
// The manifest names each layer by the digest of its compressed bytes (what
// the registry and the content store address it by); the image config names
// each one by its "diff_id", the digest of the uncompressed tar (sha256, or
// sha512, which the OCI image spec also registers: both are verified). Unpack
// hashes every decompressed layer as it applies it and fails with
// ErrDiffIDMismatch when that hash is not the config's diff_id: the files on
// disk are then exactly what the image's author built.
//
// The result is an OCI runtime bundle: a directory (mode 0700) holding
// rootfs/ (mode 0755), into which step 11 writes config.json. There are two
// ways to make that rootfs (Options.Snapshotter), as containerd has two
// snapshotters:
//
//   - Native applies every layer in order, with containerd's own archive
//     code (whiteouts, and no path can leave the rootfs), into one plain
//     directory a learner can look at: a full copy per container.
//   - Overlayfs is containerd's overlayfs snapshotter (plugins/snapshots/
//     overlay), the node's default where the kernel has it
//     (DefaultSnapshotter, containerd's overlayutils.Supported in a mount
//     namespace of its own, so that a killed probe leaves no mount). Each layer
//     is unpacked once into a committed snapshot of a Snapshots directory,
//     found by its chain ID and named by a short number (<root>/<N>/fs;
//     overlay's mount options must fit in one page). The layers of an image
//     are applied in parallel: with whiteouts kept as overlay whiteouts (0/0
//     character devices) and opaque directories as trusted.overlay.opaque,
//     as containerd's overlay applier writes them, a layer's content does
//     not depend on the layers under it (but for the directories a layer
//     implies without naming them, which then take their owner and mode
//     from the layers below, as containerd's applier copies them from its
//     parents). Each is applied into a tmp-*
//     directory and renamed to its number only once verified, so a layer
//     that fails half-way is never committed. A container's rootfs is then
//     an active snapshot (its own upper and work directories) and an
//     overlay mount (containerd's core/mount) of the image's snapshots, top
//     first; a second container of the image unpacks nothing. RemoveBundle
//     unmounts it and removes the upper directory; Snapshots.GC removes the
//     committed snapshots no stored image uses and no container stands on.
//
// Written by hand, because it is the lesson: the Snapshots directory and
// its readable index (containerd keeps the same records in bbolt), chain
// IDs to snapshot numbers, commit by rename, the parallel apply. Taken from
// containerd: archive.Apply and OverlayConvertWhiteout, core/mount (which
// also shortens long lowerdir options and idmaps lowers), overlayutils'
// probe (probe.go: its mount made in a mount namespace of its own).
//
// An image of more than MaxLayers (125) layers is refused before anything
// is unpacked, in both modes, counted from one read of the manifest.
//
// Each layer is streamed once, never stored on disk: blob -> decompression
// and sha256 in one goroutine -> containerd's archive.Apply in another. The
// decompressing goroutine may run up to 128 MiB ahead, in memory (less
// where the kernel will not map that much), and goes on to the next layer
// as soon as it has finished one, so archive.Apply (the slower half, on
// small files) rarely waits. A panic while applying a layer on its chrooted
// thread reaches the caller as *ApplyPanic.
//
// # A rootfs for a user namespace
//
// A pod with hostUsers: false runs in a user namespace that maps its ids
// 0-65535 to a range of the host's (65536-131071 for the first such pod).
// Its rootfs must then be owned by that range, or its root would find its
// own files owned by "nobody". runc idmaps bind mounts but not the rootfs.
// With the overlayfs snapshotter, Options.Shift idmaps the overlay's lower
// directories (mount_setattr(2) MOUNT_ATTR_IDMAP, through core/mount's
// uidmap=/gidmap= options): the node's shared snapshots appear owned by the
// range, nothing is chowned, and the upper directory is the range's root's.
// Where the kernel refuses, and with the native snapshotter, podlab takes
// the other answer, which works on every file system: Options.Shift
// (ShiftOwnership) chowns the container's own
// copy of the image by the range's base before the bundle is put in place
// (uid u becomes BASE+u; ids past the range become 65534), restoring the
// setuid/setgid bits and file capabilities chown clears, the capabilities
// rewritten as version 3 for the range's root so that no other namespace
// honours them. It costs one lchown per file, at every unpack.
//
// Unpack never leaves a half-made bundle: it works in a temporary sibling of
// the bundle directory and renames it into place only when every layer is
// applied and verified. The package never prints: it returns a Result and
// reports each layer to an optional callback.
package unpack
