package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"
)

// The write-ahead log, as etcd has one.
//
// etcd makes a write durable by appending it to its WAL and fsyncing that
// one file, and commits its bbolt file only now and then, with many writes
// in one transaction. A bbolt commit costs two fsyncs and writes every page
// the transaction changed (about 8 here: the records' leaf, the index's
// leaf, the branches above them, the freelist, the meta page), so one
// commit per write is most of a write's time.
//
// podlab does the same within a burst of operations. While a process holds
// the file, its writes go into one open bbolt transaction (the batch) and
// each Update appends what it wrote to the WAL, <store>.wal, and waits for
// an fsync of it before it returns (concurrent writers share the fsync:
// group.go): one small write to one page of a file written in place. The batch is committed when the process lets go of the file (the
// linger ends, another process waits, Close), or when the WAL is full. No
// other process can read the batch before that: bbolt's lock keeps them
// out while the file is held, as it always did. If the process dies
// holding a batch, the next process to open the file replays the WAL's
// records that are newer than the file's revision (recoverWAL), so no
// acknowledged write is lost. Every record has a revision of its own: a
// compaction, which makes none, commits the batch instead.
//
// A record: length (4 bytes), CRC-32C of the rest (4), the revision (8),
// then the bbolt writes of one Update in order, each a kind byte ('k' put
// in kv, 'K' delete from kv, 'm' put in meta), a uvarint length and the
// key, and for puts a uvarint length and the value. Records are written
// from offset 0 after each commit, over the old ones, and the commit zeroes
// the first record's header. The first invalid record ends the log; records
// not newer than the file's revision are old ones, already committed; and
// replay takes the newer ones only while each is the next revision (a log
// left beside another file does not follow it).

// walSize is the part of the WAL written with zeros when it is made, so
// that later writes land inside the file and an fsync has no file size to
// record (on ext4 that is a journal commit). A batch that fills it is
// committed; a single bigger record makes the file grow.
const walSize = 256 << 10

const walHeaderLen = 16 // length, CRC, revision

var walCRC = crc32.MakeTable(crc32.Castagnoli)

// The kinds of a WAL operation.
const (
	opPutKV    = 'k'
	opDeleteKV = 'K'
	opPutMeta  = 'm'
)

// walOp is one bbolt write of an Update.
type walOp struct {
	kind       byte
	key, value []byte
}

// walRecord is one Update's writes.
type walRecord struct {
	rev int64
	ops []walOp
}

func (r walRecord) encode() []byte {
	n := walHeaderLen
	for _, op := range r.ops {
		n += 1 + 2*binary.MaxVarintLen32 + len(op.key) + len(op.value)
	}
	b := make([]byte, walHeaderLen, n)
	binary.BigEndian.PutUint64(b[8:], uint64(r.rev))
	for _, op := range r.ops {
		b = append(b, op.kind)
		b = binary.AppendUvarint(b, uint64(len(op.key)))
		b = append(b, op.key...)
		if op.kind != opDeleteKV {
			b = binary.AppendUvarint(b, uint64(len(op.value)))
			b = append(b, op.value...)
		}
	}
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)))
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[8:], walCRC))
	return b
}

// parseWALRecord reads the record at the start of b; ok is false when there
// is none (zeros, a torn write, the end of the log).
func parseWALRecord(b []byte) (r walRecord, size int, ok bool) {
	if len(b) < walHeaderLen {
		return walRecord{}, 0, false
	}
	size = int(binary.BigEndian.Uint32(b[0:]))
	if size < walHeaderLen || size > len(b) || crc32.Checksum(b[8:size], walCRC) != binary.BigEndian.Uint32(b[4:]) {
		return walRecord{}, 0, false
	}
	r.rev = int64(binary.BigEndian.Uint64(b[8:]))
	p := b[walHeaderLen:size]
	for len(p) > 0 {
		op := walOp{kind: p[0]}
		p = p[1:]
		field := func() ([]byte, bool) {
			n, k := binary.Uvarint(p)
			if k <= 0 || uint64(len(p)-k) < n {
				return nil, false
			}
			v := p[k : k+int(n)]
			p = p[k+int(n):]
			return v, true
		}
		if op.key, ok = field(); !ok {
			return walRecord{}, 0, false
		}
		if op.kind != opDeleteKV {
			if op.value, ok = field(); !ok {
				return walRecord{}, 0, false
			}
		}
		r.ops = append(r.ops, op)
	}
	return r, size, true
}

// apply makes r's writes in btx.
func (r walRecord) apply(btx *bolt.Tx) error {
	kv, meta := btx.Bucket(kvBucket), btx.Bucket(metaBucket)
	if kv == nil || meta == nil {
		return errors.New("not a podlab store: its buckets are missing")
	}
	for _, op := range r.ops {
		var err error
		switch op.kind {
		case opPutKV:
			err = kv.Put(op.key, op.value)
		case opDeleteKV:
			err = kv.Delete(op.key)
		case opPutMeta:
			err = meta.Put(op.key, op.value)
		default:
			err = fmt.Errorf("unknown operation %q", op.kind)
		}
		if err != nil {
			return fmt.Errorf("replaying revision %d: %w", r.rev, err)
		}
	}
	return nil
}

// wal is the open log of a batch.
type wal struct {
	f   *os.File
	off int64
}

// WALPath is the write-ahead log of the store at path: path + ".wal".
func WALPath(path string) string { return walPath(path) }

// walPath is the WAL of the store at path.
func walPath(path string) string { return path + ".wal" }

// openWAL opens the WAL for a new batch, making it (zero-filled) if needed.
func openWAL(path string) (*wal, error) {
	f, err := os.OpenFile(walPath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the write-ahead log: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() < walSize {
		if _, err = f.WriteAt(make([]byte, walSize-fi.Size()), fi.Size()); err == nil {
			err = f.Sync()
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("preparing the write-ahead log %s: %w", walPath(path), err)
	}
	return &wal{f: f}, nil
}

// write writes b at the end of the batch's records, without an fsync: the
// writers of a batch share those (see group.go).
func (w *wal) write(b []byte) error {
	if _, err := w.f.WriteAt(b, w.off); err != nil {
		return err
	}
	w.off += int64(len(b))
	return nil
}

// close ends the log after a commit: the first record is zeroed, so that
// the next open knows without reading further that there is nothing to
// replay. No fsync: a record that survives a crash is older than the
// committed file and is skipped.
func (w *wal) close() error {
	_, err := w.f.WriteAt(make([]byte, walHeaderLen), 0)
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readWAL returns the log's records in order, up to the first invalid one.
// A missing log, or one whose first record is zeroed, has none.
func readWAL(path string) ([]walRecord, error) {
	f, err := os.Open(walPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the write-ahead log: %w", err)
	}
	defer f.Close()
	head := make([]byte, walHeaderLen)
	if _, err := io.ReadFull(f, head); err != nil || binary.BigEndian.Uint32(head) == 0 {
		return nil, nil
	}
	rest, err := io.ReadAll(f)
	b := append(head, rest...)
	if err != nil {
		return nil, fmt.Errorf("reading the write-ahead log: %w", err)
	}
	var recs []walRecord
	for {
		r, n, ok := parseWALRecord(b)
		if !ok {
			return recs, nil
		}
		recs = append(recs, r)
		b = b[n:]
	}
}

// walHasRecords says, from the first record's length alone, whether the log
// may hold writes to replay.
func walHasRecords(path string) bool {
	f, err := os.Open(walPath(path))
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 4)
	_, err = io.ReadFull(f, head)
	return err == nil && binary.BigEndian.Uint32(head) != 0
}

// recoverWAL replays, in one transaction, the records of the log newer than
// db's revision, in revision order from the next one: the writes of a
// process that died holding a batch. It returns how many it replayed.
func recoverWAL(db *bolt.DB, path string) (int, error) {
	recs, err := readWAL(path)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	n := 0
	err = db.Update(func(btx *bolt.Tx) error {
		meta := btx.Bucket(metaBucket)
		if meta == nil {
			return errors.New("not a podlab store: its buckets are missing")
		}
		var rev int64
		if b := meta.Get(metaRevision); len(b) == 8 {
			rev = int64(binary.BigEndian.Uint64(b))
		}
		for _, r := range recs {
			if r.rev <= rev {
				continue // committed before
			}
			if r.rev != rev+1 {
				// Not the next revision: the rest is not this file's
				// (a log left beside a file made anew).
				break
			}
			if err := r.apply(btx); err != nil {
				return err
			}
			rev = r.rev
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("replaying the write-ahead log %s: %w", walPath(path), err)
	}
	// Now committed: zero the first record, as after any commit.
	if f, err := os.OpenFile(walPath(path), os.O_WRONLY, 0); err == nil {
		f.WriteAt(make([]byte, walHeaderLen), 0)
		f.Close()
	}
	return n, nil
}
