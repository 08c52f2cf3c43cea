package rest

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// BenchmarkCreate_8Clients is issue 13's benchmark: pod creates through
// HTTPS from 8 concurrent client-go clients (a real kube-apiserver v1.37
// with etcd 3.6 on this machine: 450-500/s).
func BenchmarkCreate_8Clients(b *testing.B) {
	l := newLab(b, nil)
	var n atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	clients := make(chan *kubernetes.Clientset, 8)
	for range 8 {
		clients <- l.clientset("admin")
	}
	b.SetParallelism((8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		cs := <-clients
		var mine []time.Duration
		for pb.Next() {
			p := testPod(fmt.Sprintf("p%d", n.Add(1)))
			t0 := time.Now()
			if _, err := cs.CoreV1().Pods("default").Create(ctx(b), p, metav1.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "creates/s")
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
