package store

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// ForEachAt calls fn for every key under prefix, from the key from on
// (from "" or before prefix: the first), in key order, as the keys were at
// revision rev: etcd's range read "with revision", which kube-apiserver
// uses to serve the later pages of a list (the continue token names the
// first page's revision) and a list with resourceVersionMatch=Exact. rev
// 0 reads the current keys.
//
// The keys as they were come from the current keys and the history after
// rev: a key written after rev had, at rev, the value its first later
// write replaced (the record that write names as its previous one), or no
// value if that write created it. Compaction keeps the state at the
// compacted revision readable (see dropReplaced), so any rev from
// CompactedRevision to Revision can be read; an older one fails with
// ErrCompacted, a later one with ErrBadRevision.
func (tx *Tx) ForEachAt(prefix, from string, rev int64, fn func(KV) error) error {
	_, err := tx.PageAt(prefix, from, rev, 0, fn)
	return err
}

// PageAt is ForEachAt for the first limit keys only (0: all of them), a
// page of a list: fn gets at most limit keys, and remaining counts the
// keys after them, whose values are not read. etcd's range read with a
// limit answers the same (its count is the whole range's), and
// kube-apiserver reads each page of a list that way: a page of 500 of
// 6,000 pods reads 500 values, not the 6,000 - (page - 1) x 500 left.
func (tx *Tx) PageAt(prefix, from string, rev, limit int64, fn func(KV) error) (remaining int64, err error) {
	if err := checkKey(prefix); err != nil {
		return 0, fmt.Errorf("listing %q: %w", prefix, err)
	}
	if limit < 0 {
		return 0, fmt.Errorf("listing %s: a page of %d keys", prefix, limit)
	}
	if tx.e != nil {
		if rev < 0 {
			return 0, fmt.Errorf("listing %s at revision %d: %w", prefix, rev, ErrBadRevision)
		}
		kvs, remaining, err := tx.e.pageAt(prefix, from, rev, limit)
		if err != nil {
			return 0, fmt.Errorf("listing %s at revision %d: %w", prefix, rev, err)
		}
		for _, kv := range kvs {
			if err := fn(kv); err != nil {
				return 0, err
			}
		}
		return remaining, nil
	}
	switch {
	case rev < 0 || rev > tx.rev:
		return 0, fmt.Errorf("listing %s at revision %d: the store is at revision %d: %w", prefix, rev, tx.rev, ErrBadRevision)
	case rev != 0 && rev < tx.compacted:
		return 0, fmt.Errorf("listing %s at revision %d: compacted up to %d: %w", prefix, rev, tx.compacted, ErrCompacted)
	}
	var n int64 // keys given to fn
	emit := func(kv KV) error {
		if limit > 0 && n >= limit {
			remaining++
			return nil
		}
		n++
		return fn(kv)
	}
	if from < prefix {
		from = prefix
	}
	then := map[string]*KV{} // the keys written after rev: their KV at rev, nil when they did not exist
	if rev != 0 && rev != tx.rev {
		c := tx.revs.Cursor()
		for k, v := c.Seek(revKey(rev+1, 0)); k != nil; k, v = c.Next() {
			rec, ok := parseRecord(v)
			if !ok {
				return 0, fmt.Errorf("listing %s at revision %d: corrupt store: the record at revision %d is truncated", prefix, rev, revisionOf(k))
			}
			key := string(rec.key)
			if _, seen := then[key]; seen || !strings.HasPrefix(key, prefix) || key < from {
				continue
			}
			if rec.typ == Added {
				then[key] = nil
				continue
			}
			kv, err := tx.replaced(key, rec)
			if err != nil {
				return 0, fmt.Errorf("listing %s at revision %d: %w", prefix, rev, err)
			}
			then[key] = &kv
		}
	}
	var old []KV // the keys written after rev that existed at rev, in key order
	for _, kv := range then {
		if kv != nil {
			old = append(old, *kv)
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i].Key < old[j].Key })

	p := []byte(prefix)
	c := tx.keys.Cursor()
	values := tx.revs.Cursor()
	for k, v := c.Seek([]byte(from)); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		key := string(k)
		for len(old) > 0 && old[0].Key < key {
			if err := emit(old[0]); err != nil {
				return 0, err
			}
			old = old[1:]
		}
		if _, changed := then[key]; changed {
			continue
		}
		if limit > 0 && n >= limit {
			remaining++ // counted, its value not read
			continue
		}
		kr, err := decodeKeyRecord(key, v)
		if err != nil {
			return 0, fmt.Errorf("listing %s: %w", prefix, err)
		}
		rec, err := tx.valueOf(key, kr, values)
		if err != nil {
			return 0, fmt.Errorf("listing %s: %w", prefix, err)
		}
		if err := emit(kr.kv(key, rec.value)); err != nil {
			return 0, err
		}
	}
	for _, kv := range old {
		if err := emit(kv); err != nil {
			return 0, err
		}
	}
	return remaining, nil
}

// replaced reads the value that rec (a Modified or Deleted record of key)
// replaced, as the KV it was.
func (tx *Tx) replaced(key string, rec record) (KV, error) {
	v := tx.revs.Get(revKey(rec.prevRev, rec.prevSub))
	if v == nil {
		return KV{}, fmt.Errorf("the value of %s at revision %d is gone: %w", key, rec.prevRev, ErrCompacted)
	}
	p, ok := parseRecord(v)
	if !ok || !bytes.Equal(p.key, rec.key) {
		return KV{}, fmt.Errorf("corrupt store: the record at revision %d, sub-index %d is not a value of %s", rec.prevRev, rec.prevSub, key)
	}
	return KV{Key: key, Value: bytes.Clone(p.value), CreateRevision: p.create, ModRevision: rec.prevRev, Version: p.version}, nil
}
