package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// The file's layout: three top-level bbolt buckets.
var (
	// keysBucket maps each key to its current KV: create_revision,
	// mod_revision and version (8 bytes each, big-endian), then the value.
	keysBucket = []byte("keys")
	// logBucket maps revision (8 bytes, big-endian) + sub-index (4 bytes) to
	// one event (see encodeEvent): the history Watch reads.
	logBucket = []byte("log")
	// metaBucket holds the counters below.
	metaBucket = []byte("meta")

	metaFormat    = []byte("format")    // formatName
	metaRevision  = []byte("revision")  // the store's revision (8 bytes)
	metaCompacted = []byte("compacted") // the compacted revision (8 bytes)
	metaEvents    = []byte("events")    // how many events the log holds (8 bytes)
)

// formatName marks a file as a podlab store.
const formatName = "podlab-store/1"

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
	// PrevKV is the key before the write, for Modified and Deleted.
	PrevKV *KV
}

// Tx is one transaction, read-only (View) or read-write (Update). It is
// valid only inside the function it was passed to.
type Tx struct {
	btx             *bolt.Tx
	keys, log, meta *bolt.Bucket
	rev, compacted  int64
	events          int64
	history         int
	wrote, trimmed  bool // a key was written; the log was compacted
	sub             uint32
}

func newTx(btx *bolt.Tx, history int) (*Tx, error) {
	tx := &Tx{btx: btx, history: history,
		keys: btx.Bucket(keysBucket), log: btx.Bucket(logBucket), meta: btx.Bucket(metaBucket)}
	if tx.keys == nil || tx.log == nil || tx.meta == nil {
		return nil, errors.New("not a podlab store: its buckets are missing")
	}
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
	return tx.meta.Put(name, binary.BigEndian.AppendUint64(nil, uint64(v)))
}

// Revision is the store's revision: the revision of the last transaction
// that wrote. Inside an Update that has written, it is the new revision,
// the one every write of this transaction gets.
func (tx *Tx) Revision() int64 { return tx.rev }

// CompactedRevision is the revision up to which the log was compacted: the
// log holds the events of the revisions after it.
func (tx *Tx) CompactedRevision() int64 { return tx.compacted }

// Events is how many events the log holds.
func (tx *Tx) Events() int64 { return tx.events }

// Get reads one key.
func (tx *Tx) Get(key string) (KV, bool, error) {
	if err := checkKey(key); err != nil {
		return KV{}, false, fmt.Errorf("getting %q: %w", key, err)
	}
	return tx.get(key)
}

func (tx *Tx) get(key string) (KV, bool, error) {
	b := tx.keys.Get([]byte(key))
	if b == nil {
		return KV{}, false, nil
	}
	kv, err := decodeKV(key, b)
	if err != nil {
		return KV{}, false, fmt.Errorf("getting %s: %w", key, err)
	}
	return kv, true, nil
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
	p := []byte(prefix)
	c := tx.keys.Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		kv, err := decodeKV(string(k), v)
		if err != nil {
			return fmt.Errorf("listing %s: %w", prefix, err)
		}
		if err := fn(kv); err != nil {
			return err
		}
	}
	return nil
}

// Stat counts the keys that start with prefix and returns the latest
// revision that wrote one of them, without copying any value: a cheap way
// to know whether anything under a prefix changed since a revision (a
// delete lowers the count, a create or update raises the revision).
func (tx *Tx) Stat(prefix string) (count int, maxModRevision int64, err error) {
	if err := checkKey(prefix); err != nil {
		return 0, 0, fmt.Errorf("counting %q: %w", prefix, err)
	}
	p := []byte(prefix)
	c := tx.keys.Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if len(v) < 24 {
			return 0, 0, fmt.Errorf("corrupt store: the record of %s is %d bytes", k, len(v))
		}
		count++
		maxModRevision = max(maxModRevision, int64(binary.BigEndian.Uint64(v[8:])))
	}
	return count, maxModRevision, nil
}

// Create writes a new key. It fails with ErrExists if the key exists.
func (tx *Tx) Create(key string, value []byte) (KV, error) {
	if err := tx.checkWrite(key, value); err != nil {
		return KV{}, fmt.Errorf("creating %q: %w", key, err)
	}
	if _, ok, err := tx.get(key); err != nil {
		return KV{}, err
	} else if ok {
		return KV{}, fmt.Errorf("creating %s: %w", key, ErrExists)
	}
	rev := tx.nextRevision()
	kv := KV{Key: key, Value: bytes.Clone(value), CreateRevision: rev, ModRevision: rev, Version: 1}
	if err := tx.keys.Put([]byte(key), encodeKV(kv)); err != nil {
		return KV{}, fmt.Errorf("creating %s: %w", key, err)
	}
	return kv, tx.appendEvent(Event{Type: Added, Revision: rev, KV: kv})
}

// Put replaces the value of an existing key. expectModRev 0 writes
// unconditionally; otherwise the key's ModRevision must equal it, or Put
// fails with ErrConflict. A missing key fails with ErrNotFound.
func (tx *Tx) Put(key string, value []byte, expectModRev int64) (KV, error) {
	if err := tx.checkWrite(key, value); err != nil {
		return KV{}, fmt.Errorf("putting %q: %w", key, err)
	}
	prev, err := tx.expect("putting", key, expectModRev)
	if err != nil {
		return KV{}, err
	}
	rev := tx.nextRevision()
	kv := KV{Key: key, Value: bytes.Clone(value), CreateRevision: prev.CreateRevision,
		ModRevision: rev, Version: prev.Version + 1}
	if err := tx.keys.Put([]byte(key), encodeKV(kv)); err != nil {
		return KV{}, fmt.Errorf("putting %s: %w", key, err)
	}
	return kv, tx.appendEvent(Event{Type: Modified, Revision: rev, KV: kv, PrevKV: &prev})
}

// Delete removes a key, with the same expectModRev rule as Put. It returns
// the key's last value, with ModRevision set to the deletion's revision.
func (tx *Tx) Delete(key string, expectModRev int64) (KV, error) {
	if err := tx.checkWrite(key, []byte{}); err != nil {
		return KV{}, fmt.Errorf("deleting %q: %w", key, err)
	}
	prev, err := tx.expect("deleting", key, expectModRev)
	if err != nil {
		return KV{}, err
	}
	rev := tx.nextRevision()
	if err := tx.keys.Delete([]byte(key)); err != nil {
		return KV{}, fmt.Errorf("deleting %s: %w", key, err)
	}
	kv := prev
	kv.Value = bytes.Clone(prev.Value)
	kv.ModRevision = rev
	return kv, tx.appendEvent(Event{Type: Deleted, Revision: rev, KV: kv, PrevKV: &prev})
}

// Compact removes the log's events up to and including revision rev, and
// returns how many it removed. Watches from before rev then fail with
// ErrCompacted. Compacting to a revision already compacted removes nothing
// (etcd answers ErrCompacted there). Compaction is not a write: it does not
// advance the revision.
func (tx *Tx) Compact(rev int64) (removed int, err error) {
	if !tx.btx.Writable() {
		return 0, fmt.Errorf("compacting to revision %d: %w", rev, ErrReadOnly)
	}
	if rev < 0 || rev > tx.rev {
		return 0, fmt.Errorf("compacting to revision %d: the store is at revision %d: %w", rev, tx.rev, ErrBadRevision)
	}
	if rev <= tx.compacted {
		return 0, nil
	}
	removed, _, err = tx.removeEvents(rev, -1)
	if err != nil {
		return 0, fmt.Errorf("compacting to revision %d: %w", rev, err)
	}
	tx.compacted = rev
	tx.trimmed = true
	return removed, nil
}

// compactSlack is how far past its limit the log may grow before a write
// compacts it: compaction runs once per slack writes, not on every write.
func compactSlack(history int) int64 {
	return int64(max(1, min(history/10, 1000)))
}

// autoCompact keeps the log near history events: once it holds more than
// history + slack, it removes the oldest whole revisions until at most
// history remain. It never removes the revision being written.
func (tx *Tx) autoCompact() error {
	if tx.events <= int64(tx.history)+compactSlack(tx.history) {
		return nil
	}
	removed, last, err := tx.removeEvents(tx.rev-1, int(tx.events)-tx.history)
	if err != nil {
		return fmt.Errorf("compacting the log: %w", err)
	}
	if removed > 0 {
		tx.compacted = last
		tx.trimmed = true
	}
	return nil
}

// removeEvents deletes the oldest events of revisions <= upTo: all of them
// if atLeast < 0, else at least atLeast events, rounded up to a whole
// revision. It returns how many it deleted and the last revision touched.
func (tx *Tx) removeEvents(upTo int64, atLeast int) (int, int64, error) {
	var keys [][]byte
	var last int64
	c := tx.log.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		rev := revisionOf(k)
		if rev > upTo || (atLeast >= 0 && len(keys) >= atLeast && rev != last) {
			break
		}
		keys = append(keys, bytes.Clone(k))
		last = rev
	}
	for _, k := range keys {
		if err := tx.log.Delete(k); err != nil {
			return 0, 0, err
		}
	}
	tx.events -= int64(len(keys))
	return len(keys), last, nil
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
	if tx.wrote || tx.trimmed {
		if err := tx.putMetaInt(metaCompacted, tx.compacted); err != nil {
			return err
		}
		return tx.putMetaInt(metaEvents, tx.events)
	}
	return nil
}

func (tx *Tx) checkWrite(key string, value []byte) error {
	if !tx.btx.Writable() {
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

func (tx *Tx) expect(doing, key string, expectModRev int64) (KV, error) {
	if expectModRev < 0 {
		return KV{}, fmt.Errorf("%s %s: expected mod_revision %d: %w", doing, key, expectModRev, ErrBadRevision)
	}
	kv, ok, err := tx.get(key)
	if err != nil {
		return KV{}, err
	}
	if !ok {
		return KV{}, fmt.Errorf("%s %s: %w", doing, key, ErrNotFound)
	}
	if expectModRev != 0 && kv.ModRevision != expectModRev {
		return KV{}, fmt.Errorf("%s %s: expected mod_revision %d, the store has %d: %w",
			doing, key, expectModRev, kv.ModRevision, ErrConflict)
	}
	return kv, nil
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

func (tx *Tx) appendEvent(ev Event) error {
	if err := tx.log.Put(eventKey(ev.Revision, tx.sub), encodeEvent(ev)); err != nil {
		return fmt.Errorf("logging the event for %s: %w", ev.KV.Key, err)
	}
	tx.sub++
	tx.events++
	return nil
}

// checkKey accepts etcd-style keys: "/registry/pods/default/web".
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("empty key: %w", ErrBadKey)
	}
	if !strings.HasPrefix(key, "/") {
		return fmt.Errorf("key %q does not start with \"/\": %w", key, ErrBadKey)
	}
	if len(key) > bolt.MaxKeySize {
		return fmt.Errorf("key is %d bytes, more than %d: %w", len(key), bolt.MaxKeySize, ErrBadKey)
	}
	return nil
}

// eventKey is the log's key for an event: revision then sub-index, both
// big-endian, so that the log's byte order is revision order.
func eventKey(rev int64, sub uint32) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 12), uint64(rev))
	return binary.BigEndian.AppendUint32(k, sub)
}

func revisionOf(eventKey []byte) int64 {
	return int64(binary.BigEndian.Uint64(eventKey[:8]))
}

func encodeKV(kv KV) []byte {
	b := make([]byte, 0, 24+len(kv.Value))
	b = appendCounters(b, kv)
	return append(b, kv.Value...)
}

func decodeKV(key string, b []byte) (KV, error) {
	if len(b) < 24 {
		return KV{}, fmt.Errorf("corrupt store: the record of %s is %d bytes", key, len(b))
	}
	return KV{
		Key:            key,
		CreateRevision: int64(binary.BigEndian.Uint64(b[0:])),
		ModRevision:    int64(binary.BigEndian.Uint64(b[8:])),
		Version:        int64(binary.BigEndian.Uint64(b[16:])),
		Value:          bytes.Clone(b[24:]),
	}, nil
}

func appendCounters(b []byte, kv KV) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(kv.CreateRevision))
	b = binary.BigEndian.AppendUint64(b, uint64(kv.ModRevision))
	return binary.BigEndian.AppendUint64(b, uint64(kv.Version))
}

// encodeEvent: type (1 byte: A, M, D), key length (uvarint), key, the KV's
// counters (24 bytes), value length (uvarint), value, then 0, or 1 and the
// previous KV's counters, value length and value.
func encodeEvent(ev Event) []byte {
	n := 1 + 10 + len(ev.KV.Key) + 24 + 10 + len(ev.KV.Value) + 1
	if ev.PrevKV != nil {
		n += 24 + 10 + len(ev.PrevKV.Value)
	}
	b := make([]byte, 0, n)
	b = append(b, ev.Type[0])
	b = binary.AppendUvarint(b, uint64(len(ev.KV.Key)))
	b = append(b, ev.KV.Key...)
	b = appendCounters(b, ev.KV)
	b = binary.AppendUvarint(b, uint64(len(ev.KV.Value)))
	b = append(b, ev.KV.Value...)
	if ev.PrevKV == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = appendCounters(b, *ev.PrevKV)
	b = binary.AppendUvarint(b, uint64(len(ev.PrevKV.Value)))
	return append(b, ev.PrevKV.Value...)
}

// eventReader decodes encodeEvent's fields in order; the first short read
// sets bad.
type eventReader struct {
	b   []byte
	bad bool
}

func (r *eventReader) bytes(n uint64) []byte {
	if r.bad || uint64(len(r.b)) < n {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *eventReader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *eventReader) kv(key string) KV {
	c := r.bytes(24)
	if r.bad {
		return KV{}
	}
	kv := KV{Key: key,
		CreateRevision: int64(binary.BigEndian.Uint64(c[0:])),
		ModRevision:    int64(binary.BigEndian.Uint64(c[8:])),
		Version:        int64(binary.BigEndian.Uint64(c[16:])),
	}
	kv.Value = bytes.Clone(r.bytes(r.uvarint()))
	if kv.Value == nil {
		kv.Value = []byte{}
	}
	return kv
}

// eventKeyOf reads only an encoded event's key, to filter by prefix before
// copying values.
func eventKeyOf(b []byte) []byte {
	r := eventReader{b: b}
	r.bytes(1)
	return r.bytes(r.uvarint())
}

func decodeEvent(rev int64, b []byte) (Event, error) {
	r := eventReader{b: b}
	ev := Event{Revision: rev}
	switch t := r.bytes(1); {
	case r.bad:
	case t[0] == 'A':
		ev.Type = Added
	case t[0] == 'M':
		ev.Type = Modified
	case t[0] == 'D':
		ev.Type = Deleted
	default:
		return Event{}, fmt.Errorf("corrupt store: event at revision %d has type %q", rev, t)
	}
	key := string(r.bytes(r.uvarint()))
	ev.KV = r.kv(key)
	if hasPrev := r.bytes(1); !r.bad && hasPrev[0] == 1 {
		prev := r.kv(key)
		ev.PrevKV = &prev
	}
	if r.bad {
		return Event{}, fmt.Errorf("corrupt store: event at revision %d is truncated", rev)
	}
	return ev, nil
}
