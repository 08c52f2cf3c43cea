package testenv

import (
	"slices"
	"testing"
	"time"
)

// Paired times two ways of doing the same work side by side, as the
// benchmarks compare on these noisy machines: rounds rounds per b.Loop
// iteration, a then b in even rounds and b then a in odd ones. It reports
// each one's median as NAME-ms and the median of b's time over a's as
// B-x-A, and returns them.
func Paired(b *testing.B, rounds int, nameA, nameB string, runA, runB func() time.Duration) (medA, medB time.Duration, ratio float64) {
	b.Helper()
	var as, bs []time.Duration
	var ratios []float64
	for b.Loop() {
		for i := range rounds {
			var ta, tb time.Duration
			if i%2 == 0 {
				ta, tb = runA(), runB()
			} else {
				tb, ta = runB(), runA()
			}
			as, bs = append(as, ta), append(bs, tb)
			ratios = append(ratios, float64(tb)/float64(ta))
		}
	}
	slices.Sort(as)
	slices.Sort(bs)
	slices.Sort(ratios)
	medA, medB, ratio = as[len(as)/2], bs[len(bs)/2], ratios[len(ratios)/2]
	b.ReportMetric(float64(medA)/1e6, nameA+"-ms")
	b.ReportMetric(float64(medB)/1e6, nameB+"-ms")
	b.ReportMetric(ratio, nameB+"-x-"+nameA)
	return medA, medB, ratio
}
