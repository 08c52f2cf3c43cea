// Package units prints byte counts for people, in decimal units as
// registries, Docker and podlab's narration print them ("12.3 MB").
package units

import "fmt"

// HumanSize is n bytes in decimal units: "999 B", "1.5 kB", "12.3 MB".
func HumanSize(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
