package statedir

import (
	"os"
	"path/filepath"
)

// Default is the state directory when none is given: /var/lib/podlab for
// root, as a kubelet's /var/lib/kubelet, and $XDG_DATA_HOME/podlab (or
// ~/.local/share/podlab) for everyone else. podlab and podlab-runc share it.
func Default() string {
	if os.Geteuid() == 0 {
		return "/var/lib/podlab"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "podlab")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "podlab")
	}
	return filepath.Join(os.TempDir(), "podlab")
}
