package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// listAt reads the keys under prefix from from at rev, as "key=value@mod".
func listAt(s *Store, prefix, from string, rev int64) (string, error) {
	var got []string
	err := s.View(context.Background(), func(tx *Tx) error {
		return tx.ForEachAt(prefix, from, rev, func(kv KV) error {
			got = append(got, fmt.Sprintf("%s=%s@%d/v%d", strings.TrimPrefix(kv.Key, prefix), kv.Value, kv.ModRevision, kv.Version))
			return nil
		})
	})
	return strings.Join(got, " "), err
}

// TestTx_ForEachAt: the keys as they were at a revision, whatever was
// created, changed or deleted since, also across a compaction up to that
// revision.
func TestTx_ForEachAt(t *testing.T) {
	s, _ := tempStore(t)
	update(t, s,
		create("/p/b", "b1"), create("/p/d", "d1"), create("/p/f", "f1"), create("/other", "o"), // 1-4
		put("/p/b", "b2", 0), // 5
	)
	// the state at 5: b=b2 d=d1 f=f1
	update(t, s,
		create("/p/a", "a1"), put("/p/d", "d2", 0), del("/p/f", 0), create("/p/e", "e1"), // 6-9
		put("/p/d", "d3", 0), create("/p/f", "f2"), del("/p/b", 0), // 10-12
	)
	tests := []struct {
		name string
		from string
		rev  int64
		want string
	}{
		{"now", "", 0, "a=a1@6/v1 d=d3@10/v3 e=e1@9/v1 f=f2@11/v1"},
		{"the current revision", "", 12, "a=a1@6/v1 d=d3@10/v3 e=e1@9/v1 f=f2@11/v1"},
		{"at 5: before the creates, updates and deletes", "", 5, "b=b2@5/v2 d=d1@2/v1 f=f1@3/v1"},
		{"at 7: one update in", "", 7, "a=a1@6/v1 b=b2@5/v2 d=d2@7/v2 f=f1@3/v1"},
		{"at 1", "", 1, "b=b1@1/v1"},
		{"at 5 from a key", "/p/c", 5, "d=d1@2/v1 f=f1@3/v1"},
		{"at 5 after the last key", "/p/g", 5, ""},
		{"at 5 from a key and its null byte", "/p/d\x00", 5, "f=f1@3/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := listAt(s, "/p/", tt.from, tt.rev)
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}

	// Compacting up to 5 keeps the state at 5 readable, and no older one.
	if err := s.Compact(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	checkLayout(t, s)
	if got, err := listAt(s, "/p/", "", 5); err != nil || got != "b=b2@5/v2 d=d1@2/v1 f=f1@3/v1" {
		t.Errorf("at 5 after compacting up to 5: %q, %v", got, err)
	}
	bad := []struct {
		name string
		rev  int64
		is   error
	}{
		{"a compacted revision", 4, ErrCompacted},
		{"a future revision", 13, ErrBadRevision},
		{"a negative revision", -1, ErrBadRevision},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := listAt(s, "/p/", "", tt.rev); !errors.Is(err, tt.is) {
				t.Errorf("got %v, want %v", err, tt.is)
			}
		})
	}
	// Once compaction passes the writes after 5, their replaced values go.
	if err := s.Compact(context.Background(), 12); err != nil {
		t.Fatal(err)
	}
	checkLayout(t, s)
	if _, err := listAt(s, "/p/", "", 5); !errors.Is(err, ErrCompacted) {
		t.Errorf("at 5 after compacting up to 12: %v, want ErrCompacted", err)
	}
	for _, k := range []string{"/p/b", "/p/d", "/p/f"} {
		if got := recordsOf(t, s, k); len(got) > 1 {
			t.Errorf("%s has records at %v after compacting up to 12", k, got)
		}
	}
}

// pageAt reads a page of at most limit keys, as "key=value", and the count
// of the keys after it.
func pageAt(s *Store, prefix, from string, rev, limit int64) (string, int64, error) {
	var got []string
	var remaining int64
	err := s.View(context.Background(), func(tx *Tx) error {
		var err error
		remaining, err = tx.PageAt(prefix, from, rev, limit, func(kv KV) error {
			got = append(got, fmt.Sprintf("%s=%s", strings.TrimPrefix(kv.Key, prefix), kv.Value))
			return nil
		})
		return err
	})
	return strings.Join(got, " "), remaining, err
}

// testPageAt: a page of a list holds at most limit keys, now or at an
// older revision, and counts the keys after it (what kube's
// remainingItemCount says).
func testPageAt(t *testing.T, s *Store) {
	const p = "/registry/p/"
	r1 := update(t, s, create(p+"a", "a1"), create(p+"b", "b1"), create(p+"c", "c1"), create(p+"d", "d1"), create("/registry/q", "o"))
	update(t, s, put(p+"b", "b2", 0), del(p+"c", 0), create(p+"e", "e1"))
	tests := []struct {
		name      string
		from      string
		rev       int64
		limit     int64
		want      string
		remaining int64
	}{
		{"a page of 2 now", "", 0, 2, "a=a1 b=b2", 2},
		{"the next page", p + "b\x00", 0, 2, "d=d1 e=e1", 0},
		{"a page larger than what is left", p + "c", 0, 10, "d=d1 e=e1", 0},
		{"no limit", "", 0, 0, "a=a1 b=b2 d=d1 e=e1", 0},
		{"a page of 1 at an older revision", "", r1, 1, "a=a1", 3},
		{"the next page there: a value replaced since, a key deleted since", p + "a\x00", r1, 2, "b=b1 c=c1", 1},
		{"the last page there", p + "c\x00", r1, 2, "d=d1", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, remaining, err := pageAt(s, p, tt.from, tt.rev, tt.limit)
			if err != nil || got != tt.want || remaining != tt.remaining {
				t.Errorf("got %q and %d more, %v; want %q and %d more", got, remaining, err, tt.want, tt.remaining)
			}
		})
	}
	if _, _, err := pageAt(s, p, "", 0, -1); err == nil {
		t.Errorf("a page of -1 keys: no error")
	}
}

func TestTx_PageAt(t *testing.T) {
	s, _ := tempStore(t)
	testPageAt(t, s)
}

func TestEtcd_PageAt(t *testing.T) {
	s, _ := etcdStore(t)
	testPageAt(t, s)
}
