package apiserver

import (
	"fmt"
	"testing"
)

// BenchmarkCreate is one pod create through the whole gate (make bench
// compares its rate with raw bbolt writes: internal/bench).
func BenchmarkCreate(b *testing.B) {
	s, _ := testServer(b)
	c := as(b, s, "admin")
	for i := 0; b.Loop(); i++ {
		if _, err := c.Create(ctx(b), testPod(fmt.Sprintf("p%d", i))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList lists 10,000 pods through the gate.
func BenchmarkList(b *testing.B) {
	s, _ := testServer(b)
	c := as(b, s, "admin")
	for i := 0; i < 10000; i++ {
		if _, err := c.Create(ctx(b), testPod(fmt.Sprintf("p%05d", i))); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		l, err := c.List(ctx(b), "pods", "default", ListOptions{})
		if err != nil || len(l.Items) != 10000 {
			b.Fatal(err)
		}
	}
}
