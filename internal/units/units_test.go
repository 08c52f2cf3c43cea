package units_test

import (
	"testing"

	"github.com/podlab/podlab/internal/units"
)

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 12_345_678: "12.3 MB", 3_000_000_000: "3.0 GB"} {
		if got := units.HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}
