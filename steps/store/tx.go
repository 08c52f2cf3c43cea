package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// The file's layout: etcd's own design, in two top-level bbolt buckets.
// etcd keeps every value once, in a bucket keyed by revision (its "key"
// bucket), and an index from each key to its revisions, which it rebuilds
// in memory at start. podlab reopens the file for every burst of
// operations, so its index is on disk too, and it stays small: no value is
// in it.
//
// The index and the records share one bucket, kv, under two key prefixes,
// so that a write dirties one B-tree: the leaf of its record, the leaf of
// its key's index entry, and the branch pages above them, the upper ones
// shared (as two buckets, each had a whole path of its own). Pages
// written per commit (BenchmarkPagesPerCommit: one create per commit,
// 1.2KB values, the meta page included), at 300 / 2,000 / 10,000 objects:
// one bucket 6.85 / 8.3 / 8.5; two buckets (layout 2) 7.3 / 8.4 / 9.3; raw
// bbolt, one Put per commit, 5.9 / 6.4 / 6.8. Each page costs ~25-30µs of
// fsync on the project's disk.
var (
	// kvBucket holds two keyspaces, revs and keys (see the prefixes).
	kvBucket = []byte("kv")
	// metaBucket holds the counters below. It is small, so bbolt keeps it
	// inline in the page that lists the top-level buckets, which every
	// commit writes anyway: it costs no page of its own.
	metaBucket = []byte("meta")

	metaFormat    = []byte("format")    // formatName: which layout the file has
	metaRevision  = []byte("revision")  // the store's revision (8 bytes)
	metaCompacted = []byte("compacted") // the compacted revision (8 bytes)
	metaEvents    = []byte("events")    // how many records revs holds after the compacted revision (8 bytes)
)

// The keyspaces of kv, by the first byte of their keys.
const (
	// revsPrefix starts the keys of revs, the records: 'r', then revision
	// (8 bytes, big-endian) + sub-index (4 bytes) map to one record (see
	// record): the event of one write, with the value it wrote. They are
	// the history Watch reads, and where every value lives, once.
	// Compaction removes the records up to a revision, except those that
	// still hold the current value of their key. Revisions only grow, so
	// new records go to the end of the bucket ('r' sorts after 'k').
	revsPrefix byte = 'r'
	// keysPrefix starts the keys of keys, the index: 'k', then each live
	// key ("k/registry/pods/default/web") maps to a keyRecord: its
	// create_revision, mod_revision and version, and where its value is in
	// revs.
	keysPrefix byte = 'k'
)

// formatName marks a file as a podlab store, and names its layout: "/3" is
// the layout above. Layout 1 (the first podlab stores) kept each value
// twice, in keys and in a bucket "log"; layout 2 had the index and the
// records in two buckets, "keys" and "revs". This package reads neither.
const (
	formatPrefix = "podlab-store/"
	formatLayout = "3"
	formatName   = formatPrefix + formatLayout
)

// The kv bucket keeps bbolt's default fill (0.5: a page that splits keeps
// half its entries). etcd packs the pages of its revision bucket (0.9-1.0),
// where keys only grow; here the same bucket takes the index's keys in any
// order, and packed pages split again at the next insert among them. Pages
// written per commit at 300 / 2,000 / 10,000 objects (as
// BenchmarkPagesPerCommit counts them): names in order 6.85 / 8.29 / 8.50
// at 0.5, 6.79 / 8.27 / 8.48 at 0.9; names in random order 6.81 / 8.28 /
// 8.48 at 0.5, 6.98 / 8.33 / 8.51 at 0.9. (With values of ~1.2KB a leaf
// holds two or three records at any fill.)

// keyspace is one of kv's two halves: the entries whose keys start with
// its prefix, addressed without the prefix.
type keyspace struct {
	b      *bolt.Bucket
	prefix byte
	log    *[]walOp // where Put and Delete record themselves for the WAL; nil: nowhere
}

// key is k with the prefix: a new slice (bbolt keeps a Put's key until the
// transaction ends).
func (ks keyspace) key(k []byte) []byte {
	return append(append(make([]byte, 0, 1+len(k)), ks.prefix), k...)
}

func (ks keyspace) Get(k []byte) []byte { return ks.b.Get(ks.key(k)) }

func (ks keyspace) Put(k, v []byte) error {
	key := ks.key(k)
	err := ks.b.Put(key, v)
	if err == nil && ks.log != nil {
		*ks.log = append(*ks.log, walOp{kind: opPutKV, key: key, value: v})
	}
	return err
}

func (ks keyspace) Delete(k []byte) error {
	key := ks.key(k)
	err := ks.b.Delete(key)
	if err == nil && ks.log != nil {
		*ks.log = append(*ks.log, walOp{kind: opDeleteKV, key: key})
	}
	return err
}

func (ks keyspace) Cursor() *keyspaceCursor {
	return &keyspaceCursor{c: ks.b.Cursor(), prefix: ks.prefix}
}

// keyspaceCursor walks one keyspace, in key order: its keys come without
// the prefix, and it ends (nil) where the keyspace ends.
type keyspaceCursor struct {
	c      *bolt.Cursor
	prefix byte
	seek   []byte // reused: bbolt does not keep a Seek's key
}

func (kc *keyspaceCursor) First() ([]byte, []byte) { return kc.Seek(nil) }

func (kc *keyspaceCursor) Seek(k []byte) ([]byte, []byte) {
	kc.seek = append(append(kc.seek[:0], kc.prefix), k...)
	return kc.strip(kc.c.Seek(kc.seek))
}

func (kc *keyspaceCursor) Next() ([]byte, []byte) { return kc.strip(kc.c.Next()) }

func (kc *keyspaceCursor) strip(k, v []byte) ([]byte, []byte) {
	if len(k) == 0 || k[0] != kc.prefix {
		return nil, nil
	}
	return k[1:], v
}

// KV is a key as stored, with etcd's three counters. The API server shows
// ModRevision as the object's metadata.resourceVersion.
type KV struct {
	Key   string
	Value []byte
	// CreateRevision is the revision of the write that created the key.
	CreateRevision int64
	// ModRevision is the revision of the last write to the key.
	ModRevision int64
	// Version counts the writes since the key was created (1 after Create).
	Version int64
}

// EventType says what an event did to its key.
type EventType string

// The event types, named as in a Kubernetes watch.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// Event is one write, as the log recorded it.
type Event struct {
	Type EventType
	// Revision is the revision of the transaction that wrote it.
	Revision int64
	// KV is the key after the write. For Deleted it is the key's last
	// value, with ModRevision set to the deletion's revision (as the API
	// server returns a deleted object).
	KV KV
	// PrevKV is the key before the write, for Modified and Deleted. A
	// Deleted event always has it (its value is KV's). A Modified event
	// reads it from the previous write's record, which revs holds until
	// compaction passes this write (a value kept by an earlier compaction
	// stays until then too: see dropReplaced); nil if it is gone.
	PrevKV *KV
}

// Tx is one transaction, read-only (View) or read-write (Update). It is
// valid only inside the function it was passed to.
type Tx struct {
	btx            *bolt.Tx
	keys, revs     keyspace // the index and the records, in kv
	meta           *bolt.Bucket
	rev, compacted int64
	events         int64
	history        int
	wrote, trimmed bool // a key was written; the history was compacted
	sub            uint32
	written        []string // the keys written, in order
	readOnly       bool     // a View: writes fail with ErrReadOnly
	ops            []walOp  // the bbolt writes made, for the WAL
	durable        []func() // run by Update once the writes are durable
	e              *etcdTx  // the transaction's state over etcd; nil for bbolt (see etcd.go)
}

func newTx(btx *bolt.Tx, history int) (*Tx, error) {
	kv, meta := btx.Bucket(kvBucket), btx.Bucket(metaBucket)
	if kv == nil || meta == nil {
		return nil, errors.New("not a podlab store: its buckets are missing")
	}
	tx := &Tx{btx: btx, history: history, meta: meta}
	tx.keys = keyspace{b: kv, prefix: keysPrefix, log: &tx.ops}
	tx.revs = keyspace{b: kv, prefix: revsPrefix, log: &tx.ops}
	var err error
	if tx.rev, err = tx.metaInt(metaRevision); err != nil {
		return nil, err
	}
	if tx.compacted, err = tx.metaInt(metaCompacted); err != nil {
		return nil, err
	}
	if tx.events, err = tx.metaInt(metaEvents); err != nil {
		return nil, err
	}
	return tx, nil
}

func (tx *Tx) metaInt(name []byte) (int64, error) {
	b := tx.meta.Get(name)
	if b == nil {
		return 0, nil
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("corrupt store: meta %s is %d bytes, not 8", name, len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

func (tx *Tx) putMetaInt(name []byte, v int64) error {
	b := binary.BigEndian.AppendUint64(nil, uint64(v))
	if err := tx.meta.Put(name, b); err != nil {
		return err
	}
	tx.ops = append(tx.ops, walOp{kind: opPutMeta, key: name, value: b})
	return nil
}

// Revision is the store's revision: the revision of the last transaction
// that wrote. Inside an Update that has written, it is the new revision,
// the one every write of this transaction gets.
//
// On etcd it is the revision of the transaction's snapshot (etcd's
// revision is known only at the commit: see OnCommit); if etcd cannot be
// asked, it is 0 and the transaction fails.
func (tx *Tx) Revision() int64 {
	if tx.e != nil {
		rev, err := tx.e.snapshot()
		if err != nil && tx.e.err == nil {
			tx.e.err = err
		}
		return rev
	}
	return tx.rev
}

// OnDurable registers fn to run once this transaction's writes are
// durable: after Update has fsync'd them (to the write-ahead log, or in the
// file's commit), when Update is about to return, outside the store's lock.
// The functions run in the order they were registered, and not at all when
// the transaction fails. This is where to say "stored at revision N": said
// inside the transaction, a crash before the fsync would make it a lie.
// A read-only transaction (View) runs them when View returns.
func (tx *Tx) OnDurable(fn func()) { tx.durable = append(tx.durable, fn) }

// OnCommit registers fn to run with the revision this transaction's writes
// got, once they are committed (before the OnDurable functions registered
// after it). With bbolt it is Revision; with etcd, etcd gives it only at
// the commit, and it may be later than the one Create, Put and Delete
// returned inside the transaction (another client wrote meanwhile). Set a
// resourceVersion here. A transaction that wrote nothing gets its snapshot's
// revision.
func (tx *Tx) OnCommit(fn func(rev int64)) {
	if tx.e != nil {
		tx.e.commit = append(tx.e.commit, fn)
		return
	}
	rev := tx.rev
	tx.durable = append(tx.durable, func() { fn(rev) })
}

// Written is the keys this transaction has written so far (created, put or
// deleted), in the order it wrote them.
func (tx *Tx) Written() []string { return tx.written }

// CompactedRevision is the revision up to which the history was compacted:
// watches may start from it or later.
func (tx *Tx) CompactedRevision() int64 { return tx.compacted }

// Events is how many events the history holds: the writes after the
// compacted revision, which a watch can still read.
func (tx *Tx) Events() int64 { return tx.events }

// Get reads one key.
func (tx *Tx) Get(key string) (KV, bool, error) {
	if err := checkKey(key); err != nil {
		return KV{}, false, fmt.Errorf("getting %q: %w", key, err)
	}
	if tx.e != nil {
		kv, ok, err := tx.e.get(key)
		if err != nil {
			return KV{}, false, fmt.Errorf("getting %s: %w", key, err)
		}
		return kv, ok, nil
	}
	return tx.get(key)
}

func (tx *Tx) get(key string) (KV, bool, error) {
	kr, ok, err := tx.keyRecord(key)
	if err != nil || !ok {
		return KV{}, false, err
	}
	rec, err := tx.valueOf(key, kr, nil)
	if err != nil {
		return KV{}, false, fmt.Errorf("getting %s: %w", key, err)
	}
	return kr.kv(key, rec.value), true, nil
}

// keyRecord reads a key's entry in keys.
func (tx *Tx) keyRecord(key string) (keyRecord, bool, error) {
	b := tx.keys.Get([]byte(key))
	if b == nil {
		return keyRecord{}, false, nil
	}
	kr, err := decodeKeyRecord(key, b)
	return kr, err == nil, err
}

// valueOf reads the record that holds a key's current value, with c (a
// cursor over the records, reused across a loop) or without.
func (tx *Tx) valueOf(key string, kr keyRecord, c *keyspaceCursor) (record, error) {
	ref := revKey(kr.mod, kr.sub)
	var v []byte
	if c == nil {
		v = tx.revs.Get(ref)
	} else if k, cv := c.Seek(ref); bytes.Equal(k, ref) {
		v = cv
	}
	if v == nil {
		return record{}, fmt.Errorf("corrupt store: the value of %s (revision %d, sub-index %d) is missing", key, kr.mod, kr.sub)
	}
	rec, ok := parseRecord(v)
	if !ok || string(rec.key) != key {
		return record{}, fmt.Errorf("corrupt store: the record at revision %d, sub-index %d is not a value of %s", kr.mod, kr.sub, key)
	}
	return rec, nil
}

// List reads every key that starts with prefix, in key order.
func (tx *Tx) List(prefix string) ([]KV, error) {
	var kvs []KV
	err := tx.ForEach(prefix, func(kv KV) error {
		kvs = append(kvs, kv)
		return nil
	})
	return kvs, err
}

// ForEach calls fn for every key that starts with prefix, in key order, one
// at a time (each KV's Value is its own copy). fn's error stops the loop and
// is returned.
func (tx *Tx) ForEach(prefix string, fn func(KV) error) error {
	if err := checkKey(prefix); err != nil {
		return fmt.Errorf("listing %q: %w", prefix, err)
	}
	if tx.e != nil {
		return tx.e.forEach(prefix, fn)
	}
	p := []byte(prefix)
	c := tx.keys.Cursor()
	values := tx.revs.Cursor() // one cursor for every lookup: a B-tree descent each, no allocation
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		key := string(k)
		kr, err := decodeKeyRecord(key, v)
		if err != nil {
			return fmt.Errorf("listing %s: %w", prefix, err)
		}
		rec, err := tx.valueOf(key, kr, values)
		if err != nil {
			return fmt.Errorf("listing %s: %w", prefix, err)
		}
		if err := fn(kr.kv(key, rec.value)); err != nil {
			return err
		}
	}
	return nil
}

// Stat counts the keys that start with prefix and returns the latest
// revision that wrote one of them, without reading any value: a cheap way
// to know whether anything under a prefix changed since a revision (a
// delete lowers the count, a create or update raises the revision).
func (tx *Tx) Stat(prefix string) (count int, maxModRevision int64, err error) {
	if err := checkKey(prefix); err != nil {
		return 0, 0, fmt.Errorf("counting %q: %w", prefix, err)
	}
	if tx.e != nil {
		return tx.e.stat(prefix)
	}
	p := []byte(prefix)
	c := tx.keys.Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if len(v) != keyRecordLen {
			return 0, 0, fmt.Errorf("corrupt store: the record of %s is %d bytes, not %d", k, len(v), keyRecordLen)
		}
		count++
		maxModRevision = max(maxModRevision, int64(binary.BigEndian.Uint64(v[8:])))
	}
	return count, maxModRevision, nil
}

// Prefetch says which keys and prefixes the transaction is about to read
// (Get, ForEach): on etcd they are read together, in one round trip, and
// the later reads are served from what came back; on bbolt, where a read
// costs no round trip, it does nothing. A key or prefix this transaction
// already wrote is read as usual.
func (tx *Tx) Prefetch(keys, prefixes []string) error {
	if tx.e == nil {
		return nil
	}
	for _, k := range append(append([]string(nil), keys...), prefixes...) {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("prefetching %q: %w", k, err)
		}
	}
	if err := tx.e.prefetch(keys, prefixes); err != nil {
		return fmt.Errorf("prefetching: %w", err)
	}
	return nil
}

// StatAll is Stat of several prefixes at once, summed: on etcd, one round
// trip, and (unlike Stat) not a read the commit checks again: a
// fingerprint for a cache, as the API server's RBAC policy's.
func (tx *Tx) StatAll(prefixes ...string) (count int, maxModRevision int64, err error) {
	for _, p := range prefixes {
		if err := checkKey(p); err != nil {
			return 0, 0, fmt.Errorf("counting %q: %w", p, err)
		}
	}
	if tx.e != nil {
		return tx.e.statAll(prefixes)
	}
	for _, p := range prefixes {
		n, m, err := tx.Stat(p)
		if err != nil {
			return 0, 0, err
		}
		count, maxModRevision = count+n, max(maxModRevision, m)
	}
	return count, maxModRevision, nil
}

// Create writes a new key. It fails with ErrExists if the key exists.
func (tx *Tx) Create(key string, value []byte) (KV, error) {
	if tx.e != nil {
		return tx.e.write(tx, "creating", key, value, 0, true)
	}
	if err := tx.checkWrite(key, value); err != nil {
		return KV{}, fmt.Errorf("creating %q: %w", key, err)
	}
	if tx.keys.Get([]byte(key)) != nil {
		return KV{}, fmt.Errorf("creating %s: %w", key, ErrExists)
	}
	rev := tx.nextRevision()
	kv := KV{Key: key, Value: bytes.Clone(value), CreateRevision: rev, ModRevision: rev, Version: 1}
	if err := tx.write(kv, record{typ: Added, value: value}); err != nil {
		return KV{}, fmt.Errorf("creating %s: %w", key, err)
	}
	return kv, nil
}

// Put replaces the value of an existing key. expectModRev 0 writes
// unconditionally; otherwise the key's ModRevision must equal it, or Put
// fails with ErrConflict. A missing key fails with ErrNotFound.
func (tx *Tx) Put(key string, value []byte, expectModRev int64) (KV, error) {
	if tx.e != nil {
		return tx.e.write(tx, "putting", key, value, expectModRev, false)
	}
	if err := tx.checkWrite(key, value); err != nil {
		return KV{}, fmt.Errorf("putting %q: %w", key, err)
	}
	prev, err := tx.expect("putting", key, expectModRev)
	if err != nil {
		return KV{}, err
	}
	rev := tx.nextRevision()
	kv := KV{Key: key, Value: bytes.Clone(value), CreateRevision: prev.create,
		ModRevision: rev, Version: prev.version + 1}
	if err := tx.write(kv, record{typ: Modified, prevRev: prev.mod, prevSub: prev.sub, value: value}); err != nil {
		return KV{}, fmt.Errorf("putting %s: %w", key, err)
	}
	if err := tx.dropReplaced(prev); err != nil {
		return KV{}, fmt.Errorf("putting %s: %w", key, err)
	}
	return kv, nil
}

// Delete removes a key, with the same expectModRev rule as Put. It returns
// the key's last value, with ModRevision set to the deletion's revision.
// The DELETED event keeps a copy of that value: watchers need the deleted
// object, and its record may be compacted away before they read.
func (tx *Tx) Delete(key string, expectModRev int64) (KV, error) {
	if tx.e != nil {
		return tx.e.write(tx, "deleting", key, []byte{}, expectModRev, false)
	}
	if err := tx.checkWrite(key, []byte{}); err != nil {
		return KV{}, fmt.Errorf("deleting %q: %w", key, err)
	}
	prev, err := tx.expect("deleting", key, expectModRev)
	if err != nil {
		return KV{}, err
	}
	last, err := tx.valueOf(key, prev, nil)
	if err != nil {
		return KV{}, fmt.Errorf("deleting %s: %w", key, err)
	}
	rev := tx.nextRevision()
	kv := prev.kv(key, last.value) // a copy, taken before revs changes
	kv.ModRevision = rev
	if err := tx.write(kv, record{typ: Deleted, prevRev: prev.mod, prevSub: prev.sub, value: kv.Value}); err != nil {
		return KV{}, fmt.Errorf("deleting %s: %w", key, err)
	}
	if err := tx.dropReplaced(prev); err != nil {
		return KV{}, fmt.Errorf("deleting %s: %w", key, err)
	}
	return kv, nil
}

// write adds the record of one write to revs, at this transaction's
// revision, and points the key's entry in keys at it (or removes the
// entry, for Deleted). rec's key and counters come from kv.
func (tx *Tx) write(kv KV, rec record) error {
	rec.key, rec.create, rec.version = []byte(kv.Key), kv.CreateRevision, kv.Version
	tx.written = append(tx.written, kv.Key)
	// After a Compact to this very revision, the write is not history: only
	// a value is kept, and a deletion leaves no record.
	history := kv.ModRevision > tx.compacted
	if history || rec.typ != Deleted {
		if err := tx.revs.Put(revKey(kv.ModRevision, tx.sub), rec.encode()); err != nil {
			return err
		}
	}
	sub := tx.sub
	tx.sub++
	if history {
		tx.events++
	}
	if rec.typ == Deleted {
		return tx.keys.Delete(rec.key)
	}
	kr := keyRecord{create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version, sub: sub}
	return tx.keys.Put(rec.key, kr.encode())
}

// dropReplaced removes the record of a key's previous value when a write
// at or before the compacted revision (after a Compact to this very
// revision) replaced it. Otherwise the record stays, even if compaction
// already passed its revision (it was kept as the key's value then): the
// state at the compacted revision stays readable (ForEachAt), as etcd's
// does, and compaction removes the record once it passes the write that
// replaced it (see compact).
func (tx *Tx) dropReplaced(prev keyRecord) error {
	if prev.mod > tx.compacted || tx.rev > tx.compacted {
		return nil
	}
	return tx.revs.Delete(revKey(prev.mod, prev.sub))
}

// Compact removes the history up to and including revision rev, and
// returns how many events it removed. Watches from before rev then fail
// with ErrCompacted. As in etcd, the state at rev stays: each key's last
// value up to rev, as the key's value or the value a later write replaced
// (ForEachAt reads it); the others (values replaced up to rev, deletions)
// go. Compacting to a revision already
// compacted removes nothing (etcd answers ErrCompacted there). Compaction
// is not a write: it does not advance the revision.
func (tx *Tx) Compact(rev int64) (removed int, err error) {
	if tx.e != nil {
		return 0, fmt.Errorf("compacting to revision %d: etcd compacts outside transactions (Store.Compact)", rev)
	}
	if tx.readOnly || !tx.btx.Writable() {
		return 0, fmt.Errorf("compacting to revision %d: %w", rev, ErrReadOnly)
	}
	if rev < 0 || rev > tx.rev {
		return 0, fmt.Errorf("compacting to revision %d: the store is at revision %d: %w", rev, tx.rev, ErrBadRevision)
	}
	if rev <= tx.compacted {
		return 0, nil
	}
	removed, _, err = tx.compact(rev, -1)
	if err != nil {
		return 0, fmt.Errorf("compacting to revision %d: %w", rev, err)
	}
	tx.compacted = rev
	tx.trimmed = true
	return removed, nil
}

// compactSlack is how far past its limit the history may grow before a
// write compacts it: compaction runs once per slack writes, not on every
// write.
func compactSlack(history int) int64 {
	return int64(max(1, min(history/10, 1000)))
}

// autoCompact keeps the history near history events: once it holds more
// than history + slack, it compacts the oldest whole revisions until at
// most history remain. It never compacts the revision being written.
func (tx *Tx) autoCompact() error {
	if tx.events <= int64(tx.history)+compactSlack(tx.history) {
		return nil
	}
	removed, last, err := tx.compact(tx.rev-1, int(tx.events)-tx.history)
	if err != nil {
		return fmt.Errorf("compacting the history: %w", err)
	}
	if removed > 0 {
		tx.compacted = last
		tx.trimmed = true
	}
	return nil
}

// compact takes the oldest events after the compacted revision out of the
// history, up to revision upTo: all of them if atLeast < 0, else at least
// atLeast events, rounded up to a whole revision. Their records go, except
// each key's last value up to the new compacted revision (its current
// value, or one a later write replaced). It returns how many events
// it took and the last revision touched; the caller moves tx.compacted.
func (tx *Tx) compact(upTo int64, atLeast int) (int, int64, error) {
	var drop [][]byte
	var n int
	var last int64
	c := tx.revs.Cursor()
	for k, v := c.Seek(revKey(tx.compacted+1, 0)); k != nil; k, v = c.Next() {
		rev := revisionOf(k)
		if rev > upTo || (atLeast >= 0 && n >= atLeast && rev != last) {
			break
		}
		n++
		last = rev
		rec, ok := parseRecord(v)
		if !ok {
			return 0, 0, fmt.Errorf("corrupt store: the record at revision %d is truncated", rev)
		}
		// What stays is the state at the new compacted revision, as in
		// etcd: each key's last value up to it. A deletion goes, and so
		// does every value a write up to it replaced (also one an
		// earlier compaction kept).
		if rec.typ == Deleted {
			drop = append(drop, bytes.Clone(k))
		}
		if rec.typ != Added {
			drop = append(drop, revKey(rec.prevRev, rec.prevSub))
		}
	}
	// Deleting while a cursor walks the bucket would make it skip records.
	for _, k := range drop {
		if err := tx.revs.Delete(k); err != nil {
			return 0, 0, err
		}
	}
	tx.events -= int64(n)
	return n, last, nil
}

// finish writes the counters back; Update calls it before committing.
func (tx *Tx) finish() error {
	if tx.wrote {
		if err := tx.autoCompact(); err != nil {
			return err
		}
		if err := tx.putMetaInt(metaRevision, tx.rev); err != nil {
			return err
		}
	}
	if tx.trimmed {
		if err := tx.putMetaInt(metaCompacted, tx.compacted); err != nil {
			return err
		}
	}
	if tx.wrote || tx.trimmed {
		return tx.putMetaInt(metaEvents, tx.events)
	}
	return nil
}

func (tx *Tx) checkWrite(key string, value []byte) error {
	if tx.readOnly || !tx.btx.Writable() {
		return ErrReadOnly
	}
	if err := checkKey(key); err != nil {
		return err
	}
	if value == nil {
		return fmt.Errorf("value is nil: %w", ErrBadKey)
	}
	return nil
}

// expect reads the entry of a key that must exist, and checks its
// mod_revision against expectModRev (0: any).
func (tx *Tx) expect(doing, key string, expectModRev int64) (keyRecord, error) {
	if expectModRev < 0 {
		return keyRecord{}, fmt.Errorf("%s %s: expected mod_revision %d: %w", doing, key, expectModRev, ErrBadRevision)
	}
	kr, ok, err := tx.keyRecord(key)
	if err != nil {
		return keyRecord{}, fmt.Errorf("%s %s: %w", doing, key, err)
	}
	if !ok {
		return keyRecord{}, fmt.Errorf("%s %s: %w", doing, key, ErrNotFound)
	}
	if expectModRev != 0 && kr.mod != expectModRev {
		return keyRecord{}, fmt.Errorf("%s %s: expected mod_revision %d, the store has %d: %w",
			doing, key, expectModRev, kr.mod, ErrConflict)
	}
	return kr, nil
}

// nextRevision is the revision of this transaction's writes: the first
// write advances the store's revision by one, later ones share it.
func (tx *Tx) nextRevision() int64 {
	if !tx.wrote {
		tx.rev++
		tx.wrote = true
	}
	return tx.rev
}

// event turns the record at rev into the Event a watcher receives, reading
// a Modified event's previous value from its own record if revs still
// holds it.
func (tx *Tx) event(rev int64, rec record) Event {
	key := string(rec.key)
	ev := Event{Type: rec.typ, Revision: rev, KV: KV{Key: key, Value: bytes.Clone(rec.value),
		CreateRevision: rec.create, ModRevision: rev, Version: rec.version}}
	switch rec.typ {
	case Deleted:
		prev := ev.KV
		prev.Value, prev.ModRevision = bytes.Clone(rec.value), rec.prevRev
		ev.PrevKV = &prev
	case Modified:
		if v := tx.revs.Get(revKey(rec.prevRev, rec.prevSub)); v != nil {
			if p, ok := parseRecord(v); ok && bytes.Equal(p.key, rec.key) {
				ev.PrevKV = &KV{Key: key, Value: bytes.Clone(p.value),
					CreateRevision: rec.create, ModRevision: rec.prevRev, Version: rec.version - 1}
			}
		}
	}
	return ev
}

// checkKey accepts etcd-style keys: "/registry/pods/default/web".
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("empty key: %w", ErrBadKey)
	}
	if !strings.HasPrefix(key, "/") {
		return fmt.Errorf("key %q does not start with \"/\": %w", key, ErrBadKey)
	}
	if len(key) > maxKeySize {
		return fmt.Errorf("key is %d bytes, more than %d: %w", len(key), maxKeySize, ErrBadKey)
	}
	return nil
}

// maxKeySize is the longest key: bbolt's limit, less the index's prefix.
const maxKeySize = bolt.MaxKeySize - 1

// revKey is the key of a record in revs (after the prefix): revision then
// sub-index, both big-endian, so that the keys' byte order is revision
// order.
func revKey(rev int64, sub uint32) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 12), uint64(rev))
	return binary.BigEndian.AppendUint32(k, sub)
}

func revisionOf(revKey []byte) int64 {
	return int64(binary.BigEndian.Uint64(revKey[:8]))
}

// keyRecord is a live key's entry in keys (keyRecordLen bytes):
// create_revision, mod_revision and version (8 bytes each, big-endian),
// then the sub-index (4 bytes) that, with mod_revision, is the key of its
// value's record in revs.
type keyRecord struct {
	create, mod, version int64
	sub                  uint32
}

const keyRecordLen = 28

func (kr keyRecord) encode() []byte {
	b := make([]byte, 0, keyRecordLen)
	b = binary.BigEndian.AppendUint64(b, uint64(kr.create))
	b = binary.BigEndian.AppendUint64(b, uint64(kr.mod))
	b = binary.BigEndian.AppendUint64(b, uint64(kr.version))
	return binary.BigEndian.AppendUint32(b, kr.sub)
}

func decodeKeyRecord(key string, b []byte) (keyRecord, error) {
	if len(b) != keyRecordLen {
		return keyRecord{}, fmt.Errorf("corrupt store: the record of %s is %d bytes, not %d", key, len(b), keyRecordLen)
	}
	return keyRecord{
		create:  int64(binary.BigEndian.Uint64(b[0:])),
		mod:     int64(binary.BigEndian.Uint64(b[8:])),
		version: int64(binary.BigEndian.Uint64(b[16:])),
		sub:     binary.BigEndian.Uint32(b[24:]),
	}, nil
}

// kv is the key with a copy of value.
func (kr keyRecord) kv(key string, value []byte) KV {
	return KV{Key: key, Value: bytes.Clone(value), CreateRevision: kr.create, ModRevision: kr.mod, Version: kr.version}
}

// record is one record of revs: what one write did. Its mod_revision is
// the revision in its key. Decoded by parseRecord, its slices point into
// bbolt's memory, valid until the transaction ends.
type record struct {
	typ             EventType
	key             []byte
	create, version int64
	// prevRev and prevSub (Modified and Deleted) name the record of the
	// key's previous value; prevRev is that value's mod_revision.
	prevRev int64
	prevSub uint32
	// value is the value written; for Deleted, the key's last value.
	value []byte
}

// encode: type (1 byte: A, M, D), key length (uvarint), key,
// create_revision and version (8 bytes each), for M and D the previous
// value's revision and sub-index (8 and 4 bytes), then the value: the rest.
func (r record) encode() []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(r.key)+16+12+len(r.value))
	b = append(b, r.typ[0])
	b = binary.AppendUvarint(b, uint64(len(r.key)))
	b = append(b, r.key...)
	b = binary.BigEndian.AppendUint64(b, uint64(r.create))
	b = binary.BigEndian.AppendUint64(b, uint64(r.version))
	if r.typ != Added {
		b = binary.BigEndian.AppendUint64(b, uint64(r.prevRev))
		b = binary.BigEndian.AppendUint32(b, r.prevSub)
	}
	return append(b, r.value...)
}

// parseRecord decodes encode's fields without copying; ok is false for a
// truncated record or an unknown type.
func parseRecord(b []byte) (r record, ok bool) {
	if len(b) < 1 {
		return record{}, false
	}
	switch b[0] {
	case 'A':
		r.typ = Added
	case 'M':
		r.typ = Modified
	case 'D':
		r.typ = Deleted
	default:
		return record{}, false
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || n > uint64(len(b)) {
		return record{}, false
	}
	b = b[1+w:]
	fixed := uint64(16)
	if r.typ != Added {
		fixed += 12
	}
	if uint64(len(b)) < n+fixed {
		return record{}, false
	}
	r.key, b = b[:n], b[n:]
	r.create = int64(binary.BigEndian.Uint64(b[0:]))
	r.version = int64(binary.BigEndian.Uint64(b[8:]))
	if r.typ != Added {
		r.prevRev = int64(binary.BigEndian.Uint64(b[16:]))
		r.prevSub = binary.BigEndian.Uint32(b[24:])
	}
	r.value = b[fixed:]
	return r, true
}
