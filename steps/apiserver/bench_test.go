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

// BenchmarkList_Paged lists 10,000 pods in pages of 500, as kubectl get
// does (--chunk-size=500), through the gate: one op is the whole list.
func BenchmarkList_Paged(b *testing.B) {
	s, _ := testServer(b)
	c := as(b, s, "admin")
	for i := 0; i < 10000; i++ {
		if _, err := c.Create(ctx(b), testPod(fmt.Sprintf("p%05d", i))); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		n, cont := 0, ""
		for {
			l, err := c.List(ctx(b), "pods", "default", ListOptions{Limit: 500, Continue: cont})
			if err != nil {
				b.Fatal(err)
			}
			n += len(l.Items)
			if cont = l.Continue; cont == "" {
				break
			}
		}
		if n != 10000 {
			b.Fatalf("listed %d pods in pages", n)
		}
	}
}
