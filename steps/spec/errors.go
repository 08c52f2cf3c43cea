package spec

import "errors"

// Errors about the bundle.
var (
	// ErrNoRootfs is returned when the bundle has no rootfs directory: the
	// image must be unpacked (`podlab unpack`) before its spec is written.
	ErrNoRootfs = errors.New("bundle has no rootfs directory")

	// ErrInvalidID is returned for a container id runc would refuse, or one
	// that would escape the /podlab cgroup parent.
	ErrInvalidID = errors.New("invalid container id")
)

// Errors in the image configuration or the options: each is found while the
// spec is generated, before any container exists.
var (
	// ErrNoCommand is returned when neither the image (ENTRYPOINT, CMD) nor
	// the options (Command, Args) name a program to run.
	ErrNoCommand = errors.New("the image has no ENTRYPOINT or CMD; pass --command")

	// ErrWorkdirInProc is returned for a working directory inside /proc (or
	// /dev/fd, a link to /proc/self/fd), the pattern of CVE-2024-21626: a
	// process started in /proc/self/fd/N holds a host directory.
	ErrWorkdirInProc = errors.New("working directory inside /proc")

	// ErrIDOutOfRange is returned for a uid or gid that is not a number from
	// 0 to 4294967294 (4294967295 is (uid_t)-1, "no id" to the kernel).
	ErrIDOutOfRange = errors.New("user or group id out of range")

	// ErrInvalidOCIVersion is returned for an ociVersion that is not a
	// runtime-spec 1.x version (WithOCIVersion).
	ErrInvalidOCIVersion = errors.New("invalid ociVersion")

	// ErrInvalidUser is returned for a user string that is not one of
	// name, uid, uid:gid, name:group, uid:group.
	ErrInvalidUser = errors.New("invalid user")

	// ErrUnknownUser is returned for a user name the image's /etc/passwd
	// does not define.
	ErrUnknownUser = errors.New("unknown user")

	// ErrUnknownGroup is returned for a group name the image's /etc/group
	// does not define.
	ErrUnknownGroup = errors.New("unknown group")

	// ErrUnsafeFile is returned when /etc/passwd or /etc/group is not a
	// regular file inside the rootfs (a link out of it, a FIFO, a device).
	ErrUnsafeFile = errors.New("unsafe file in rootfs")

	// ErrInvalidEnv is returned for an environment entry that is not
	// KEY=VALUE with a non-empty key and no NUL byte.
	ErrInvalidEnv = errors.New("invalid environment variable")

	// ErrInvalidHostname is returned for a hostname the kernel would refuse
	// (empty, longer than 64 bytes) or that has characters other than
	// letters, digits, '-', '.', '_'.
	ErrInvalidHostname = errors.New("invalid hostname")

	// ErrInvalidIDMapping is returned for a user namespace mapping with no
	// ids, or one past the 32-bit id space, and for idmapped mounts asked
	// of a spec with no user namespace mappings.
	ErrInvalidIDMapping = errors.New("invalid user namespace mapping")

	// ErrInvalidLimit is returned for a CPU or memory quantity that does not
	// parse or is not positive, and for a negative pids limit.
	ErrInvalidLimit = errors.New("invalid resource limit")

	// ErrNotLinux is returned for an image built for another OS.
	ErrNotLinux = errors.New("not a linux image")

	// ErrInvalidSeccompType is returned for a seccomp profile type other
	// than RuntimeDefault, Unconfined and Localhost, for Localhost without
	// a profile file, and for a profile file with another type.
	ErrInvalidSeccompType = errors.New("invalid seccomp profile type")
)

// Errors of the runtime loading what the kubelet asked for.
var (
	// ErrSeccompProfile is returned when a Localhost seccomp profile cannot
	// be loaded: the file is missing or unreadable, is not JSON, or has no
	// defaultAction. (containerd fails CreateContainer the same way, and
	// the kubelet reports CreateContainerError.)
	ErrSeccompProfile = errors.New("cannot load seccomp profile")
)
