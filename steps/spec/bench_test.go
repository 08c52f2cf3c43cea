package spec

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// BenchmarkWithEnv_LargestLegalConfig merges the environment of the worst
// honest image: a config just under pull.MaxConfigSize (4 MiB) made of
// 200,000 environment entries, half of them naming a variable again.
// Side by side with containerd's own oci.WithEnv on the same entries, in
// paired rounds; the median of the per-round ratios must stay at most 2.0
// (podlab also validates every entry and adds PATH and HOSTNAME).
func BenchmarkWithEnv_LargestLegalConfig(b *testing.B) {
	const n, rounds, target = 200_000, 9, 2.0
	image := make([]string, n)
	size := 0
	for i := range image {
		image[i] = fmt.Sprintf("V%05d=%06d", i%(n/2), i)
		size += len(image[i]) + 3 // quotes and comma in the config's JSON
	}
	if size > 4<<20 {
		b.Fatalf("the environment is %d bytes of JSON, over the 4 MiB config limit: not a legal image", size)
	}
	timeIt := func(opt oci.SpecOpts) time.Duration {
		s := &specs.Spec{Hostname: "big"}
		began := time.Now()
		if err := opt(context.Background(), nil, nil, s); err != nil {
			b.Fatal(err)
		}
		return time.Since(began)
	}
	ratios := make([]float64, 0, rounds)
	var ours, theirs []time.Duration
	for b.Loop() {
		for i := range rounds {
			var o, t time.Duration
			sides := []func(){
				func() { o = timeIt(WithEnv(image, nil)) },
				func() { t = timeIt(oci.WithEnv(image)) },
			}
			for j := range sides { // alternate who goes first
				sides[(i+j)%2]()
			}
			ours, theirs = append(ours, o), append(theirs, t)
			ratios = append(ratios, float64(o)/float64(t))
		}
	}
	slices.Sort(ratios)
	ratio := ratios[len(ratios)/2]
	slices.Sort(ours)
	slices.Sort(theirs)
	b.ReportMetric(ratio, "env-x-containerd")
	b.ReportMetric(float64(ours[len(ours)/2])/1e6, "podlab-ms")
	verdict := "ok"
	if ratio > target {
		verdict = "MISSED"
		b.Errorf("env merge of %d entries (%d bytes): ratio %.2f to containerd's oci.WithEnv, target at most %.1f", n, size, ratio, target)
	}
	fmt.Printf("%-50s podlab %9.1f ms  other %9.1f ms  ratio %5.2f  (target <= %.2f) %s\n",
		fmt.Sprintf("spec env, %dk entries (vs containerd WithEnv)", n/1000),
		float64(ours[len(ours)/2])/1e6, float64(theirs[len(theirs)/2])/1e6, ratio, target, verdict)
}
