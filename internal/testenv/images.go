package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// DemoImagesEnv names the OCI layout of the demo images; the Makefile sets
// it to <STATE_DIR>/demo-images, where `make images` builds them.
const DemoImagesEnv = "PODLAB_DEMO_IMAGES"

// DemoImages is the OCI layout `make images` built: $PODLAB_DEMO_IMAGES,
// else <state>/demo-images of $PODLAB_DEB_CACHE's state directory (its
// <state>/cache/debs), else /var/lib/podlab/demo-images. With none there,
// the test is skipped (a failure under CI).
func DemoImages(t testing.TB) string {
	t.Helper()
	var dirs []string
	if d := os.Getenv(DemoImagesEnv); d != "" {
		dirs = append(dirs, d)
	}
	if c := os.Getenv("PODLAB_DEB_CACHE"); c != "" {
		dirs = append(dirs, filepath.Join(filepath.Dir(filepath.Dir(c)), "demo-images"))
	}
	dirs = append(dirs, "/var/lib/podlab/demo-images")
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "index.json")); err == nil {
			return d
		}
	}
	Missing(t, "no demo images in %v: run `make images`", dirs)
	return ""
}
