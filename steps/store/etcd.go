package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The etcd backend: the same Store and Tx, over a real etcd.
//
// Real clusters keep their state in etcd, and podlab's API server can too
// (podlab apiserver --etcd-servers). The keys and values are the ones the
// bbolt backend holds (the API server lays them out as kube-apiserver does:
// /registry/pods/default/web, the Kubernetes protobuf envelope), and the
// counters are etcd's own: an object's resourceVersion is its key's
// mod_revision in etcd, a list's is etcd's revision when it was read.
//
// A transaction (Update) is what etcd's concurrency.STM does: fn runs
// against a snapshot (every read is a range read at the revision the
// transaction started at), its writes are buffered (reads see them), and
// the commit is one etcd Txn that writes them all, at one new revision, if
// nothing fn read changed since: each key read must still have the
// mod_revision fn saw (0: still absent), and each prefix read must hold no
// key written after the snapshot. If a compare fails, fn runs again on a
// new snapshot, where its own checks (ErrExists, ErrConflict) see what the
// other writer did. (A key deleted under a prefix fn read is not seen by
// the compare: etcd compares the keys a range holds, not those it lost.)
//
// The revision of a transaction's writes is known only once etcd has
// committed them: inside fn, Create, Put and Delete return the next
// revision as the snapshot predicts it, and Tx.OnCommit's functions get
// the real one.

// DefaultEtcdPrefix is where kube-apiserver keeps its keys in etcd
// (--etcd-prefix): the store's keys start with it.
const DefaultEtcdPrefix = "/registry"

// EtcdConfig says how to reach etcd.
type EtcdConfig struct {
	// Endpoints are etcd's client URLs (kube-apiserver's --etcd-servers).
	Endpoints []string
	// Prefix replaces the leading /registry of every key in etcd
	// (kube-apiserver's --etcd-prefix; DefaultEtcdPrefix if empty). Only
	// keys under /registry can be stored.
	Prefix string
	// DialTimeout bounds how long Open waits for etcd to answer (5s if 0).
	DialTimeout time.Duration
}

// ErrUnavailable is returned by OpenEtcd when etcd does not answer: it is
// not running, or not at that address. Start it (podlab etcd), or retry.
var ErrUnavailable = errors.New("etcd is not answering")

type etcdBackend struct {
	cli       *clientv3.Client
	prefix    string
	endpoints []string
	history   int64 // WithHistory: compact to keep about this many revisions; 0: etcd's default, keep all

	compactMu sync.Mutex
	compacted int64 // the revision this process last compacted to (history)
}

// OpenEtcd opens a store kept in etcd. It fails with ErrUnavailable if etcd
// does not answer within the dial timeout. Of the options, only WithHistory
// applies (the others are the bbolt file's).
func OpenEtcd(ctx context.Context, cfg EtcdConfig, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.historySet && o.history < 1 {
		return nil, fmt.Errorf("opening the store in etcd: history must keep at least 1 revision, not %d", o.history)
	}
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("opening the store in etcd: no endpoints (--etcd-servers http://127.0.0.1:2379)")
	}
	for _, e := range cfg.Endpoints {
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			return nil, fmt.Errorf("opening the store in etcd: endpoint %q is not a URL: write it as http://HOST:PORT", e)
		}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultEtcdPrefix
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("opening the store in etcd: prefix %q must start with / and not end with one (as /registry)", cfg.Prefix)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Logger:      zap.NewNop(),
		// A client that notices a dead connection quickly, as
		// kube-apiserver's does (keepalive 30s, timeout 10s) but shorter.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("opening the store in etcd at %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	b := &etcdBackend{cli: cli, prefix: cfg.Prefix, endpoints: cfg.Endpoints}
	if o.historySet {
		b.history = int64(o.history)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := b.revision(pctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("opening the store in etcd at %s: %w: %v (start one with `podlab etcd`)",
			strings.Join(cfg.Endpoints, ","), ErrUnavailable, err)
	}
	return &Store{path: "etcd " + strings.Join(cfg.Endpoints, ","), etcd: b, changed: make(chan struct{})}, nil
}

// key is key's name in etcd: the prefix in place of /registry.
func (b *etcdBackend) key(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	if key == "/" { // every key: all are under /registry
		return b.prefix + "/", nil
	}
	rest, ok := strings.CutPrefix(key, DefaultEtcdPrefix)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", fmt.Errorf("key %q is not under %s, the only keys kept in etcd: %w", key, DefaultEtcdPrefix, ErrBadKey)
	}
	return b.prefix + rest, nil
}

// unkey is key's inverse.
func (b *etcdBackend) unkey(k []byte) string {
	return DefaultEtcdPrefix + strings.TrimPrefix(string(k), b.prefix)
}

func (b *etcdBackend) kv(k *mvccpb.KeyValue) KV {
	return KV{Key: b.unkey(k.Key), Value: k.Value, CreateRevision: k.CreateRevision, ModRevision: k.ModRevision, Version: k.Version}
}

// revision is etcd's current revision: the header of a read of one key.
func (b *etcdBackend) revision(ctx context.Context) (int64, error) {
	resp, err := b.cli.Get(ctx, b.prefix, clientv3.WithCountOnly())
	if err != nil {
		return 0, etcdError(err)
	}
	return resp.Header.Revision, nil
}

// etcdError maps etcd's errors to the store's.
func etcdError(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%v: %w", err, ErrCompacted)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("%v: %w", err, ErrBadRevision)
	}
	return err
}

// etcdTx is a transaction's state over etcd.
type etcdTx struct {
	b       *etcdBackend
	ctx     context.Context
	rev     int64 // the snapshot every read is at; 0 until the first read (see at)
	err     error // a failure to learn the snapshot's revision (Revision), returned at commit
	recheck bool  // a commit failed: Create reads the key first (see write)
	// serializable: reads need not be linearizable (see at)
	serializable bool
	// What Prefetch read at the snapshot: keys (nil: absent) and ranges,
	// served from here, without a round trip, when fn reads them.
	fetched       map[string]*KV
	fetchedRanges map[string][]KV
	reads         map[string]int64 // each key read (store name): its mod_revision then, 0 if absent
	prefixes      []string         // each prefix ranged over
	writes        map[string]*KV   // each key written: its new value, nil when deleted
	commit        []func(rev int64)
}

func (b *etcdBackend) begin(ctx context.Context, readOnly bool) (*Tx, error) {
	e := &etcdTx{b: b, ctx: ctx, reads: map[string]int64{}, writes: map[string]*KV{}}
	return &Tx{e: e, readOnly: readOnly}, nil
}

// at is the option of a read at the snapshot. Before the first read there
// is none yet: that read is at etcd's current revision, and its header
// names the snapshot (learn), so that no read is spent on learning it.
//
// An Update's first try reads serializably: from the member the client
// talks to, without a round of raft to confirm it is current (etcd's
// linearizable read), a third of a create's time here. A snapshot that is a
// little old costs nothing wrong: the commit's compares catch whatever
// changed since, and the transaction runs again, reading linearizably
// (recheck). podlab's one API server writes through one member, which has
// applied each write it acknowledged, so a client's resourceVersion is
// never newer than that member's state. Views read linearizably, as
// kube-apiserver's quorum reads do.
func (e *etcdTx) at() []clientv3.OpOption {
	var opts []clientv3.OpOption
	if e.serializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	if e.rev != 0 {
		opts = append(opts, clientv3.WithRev(e.rev))
	}
	return opts
}

func (e *etcdTx) learn(h *etcdserverpb.ResponseHeader) {
	if e.rev == 0 {
		e.rev = h.Revision
	}
}

// snapshot is the snapshot's revision, read from etcd if no read named it
// yet.
func (e *etcdTx) snapshot() (int64, error) {
	if e.rev == 0 {
		rev, err := e.b.revision(e.ctx)
		if err != nil {
			return 0, fmt.Errorf("reading etcd's revision: %w", err)
		}
		e.rev = rev
	}
	return e.rev, nil
}

// maxAttempts bounds how often an Update runs again because what it read
// changed before its commit; then it fails with ErrConflict (409: the
// client retries), rather than starve behind a busy range.
const maxAttempts = 32

func (b *etcdBackend) update(ctx context.Context, fn func(tx *Tx) error) (int64, error) {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		tx, err := b.begin(ctx, false)
		if err != nil {
			return 0, err
		}
		tx.e.recheck = attempt > 0
		tx.e.serializable = attempt == 0
		if err := fn(tx); err != nil {
			return 0, err
		}
		e := tx.e
		if e.err != nil {
			return 0, e.err
		}
		if len(e.writes) == 0 {
			rev, err := e.snapshot()
			if err != nil {
				return 0, err
			}
			for _, f := range tx.durable {
				f()
			}
			return rev, nil
		}
		var cmps []clientv3.Cmp
		for k, mod := range e.reads {
			ek, _ := b.key(k)
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(ek), "=", mod))
		}
		for _, p := range e.prefixes {
			ep, _ := b.key(p)
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(ep), "<", e.rev+1).WithPrefix())
		}
		var ops []clientv3.Op
		for _, k := range tx.written {
			w, ok := e.writes[k]
			if !ok {
				continue
			}
			delete(e.writes, k) // a key written twice: its last write, once
			ek, _ := b.key(k)
			if w == nil {
				ops = append(ops, clientv3.OpDelete(ek))
			} else {
				ops = append(ops, clientv3.OpPut(ek, string(w.Value)))
			}
		}
		resp, err := b.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return 0, fmt.Errorf("committing to etcd (the write may or may not have been made): %w", etcdError(err))
		}
		if !resp.Succeeded {
			if attempt+1 >= maxAttempts {
				return 0, fmt.Errorf("committing to etcd: what the transaction read changed under it %d times in a row (other writers of the same keys): %w", maxAttempts, ErrConflict)
			}
			// someone wrote what fn read: run it again on what they wrote,
			// after a random pause that grows with the attempts, so that
			// writers of one hot key do not keep colliding in lockstep
			if err := retryPause(ctx, attempt); err != nil {
				return 0, err
			}
			continue
		}
		rev := resp.Header.Revision
		b.trim(ctx, rev)
		for _, f := range e.commit {
			f(rev)
		}
		for _, f := range tx.durable {
			f()
		}
		return rev, nil
	}
}

// retryPause waits a random time below 2^attempt ms (at most 64 ms) before
// the attempt after attempt, or until ctx ends.
func retryPause(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil // the first collision retries at once
	}
	d := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (b *etcdBackend) view(ctx context.Context, fn func(tx *Tx) error) error {
	tx, err := b.begin(ctx, true)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	for _, f := range tx.durable {
		f()
	}
	return nil
}

// get reads key at the snapshot, or this transaction's write of it.
func (e *etcdTx) get(key string) (KV, bool, error) {
	if w, ok := e.writes[key]; ok {
		if w == nil {
			return KV{}, false, nil
		}
		return *w, true, nil
	}
	if kv, ok := e.fetched[key]; ok {
		if kv == nil {
			e.reads[key] = 0
			return KV{}, false, nil
		}
		e.reads[key] = kv.ModRevision
		return *kv, true, nil
	}
	ek, err := e.b.key(key)
	if err != nil {
		return KV{}, false, err
	}
	resp, err := e.b.cli.Get(e.ctx, ek, e.at()...)
	if err != nil {
		return KV{}, false, etcdError(err)
	}
	e.learn(resp.Header)
	if len(resp.Kvs) == 0 {
		e.reads[key] = 0
		return KV{}, false, nil
	}
	kv := e.b.kv(resp.Kvs[0])
	e.reads[key] = kv.ModRevision
	return kv, true, nil
}

// rangeAt reads the keys under prefix from from on, at rev (0: the
// snapshot), with this transaction's writes over them when overlay is set.
func (e *etcdTx) rangeAt(prefix, from string, rev int64, overlay bool) ([]KV, error) {
	ep, err := e.b.key(prefix)
	if err != nil {
		return nil, err
	}
	if cached, ok := e.fetchedRanges[prefix]; ok && rev == 0 && from == "" {
		return e.overlay(prefix, from, append([]KV(nil), cached...), overlay), nil
	}
	start := ep
	if from > prefix {
		if start, err = e.b.key(from); err != nil {
			return nil, err
		}
	}
	opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(ep))}
	if rev != 0 {
		opts = append(opts, clientv3.WithRev(rev))
	} else {
		opts = append(opts, e.at()...)
	}
	resp, err := e.b.cli.Get(e.ctx, start, opts...)
	if err != nil {
		return nil, etcdError(err)
	}
	if rev == 0 {
		e.learn(resp.Header)
	}
	out := make([]KV, 0, len(resp.Kvs))
	for _, k := range resp.Kvs {
		out = append(out, e.b.kv(k))
	}
	return e.overlay(prefix, from, out, overlay), nil
}

// overlay puts this transaction's writes under prefix (from from on) over
// out, the keys read, when on is set.
func (e *etcdTx) overlay(prefix, from string, out []KV, on bool) []KV {
	if !on || len(e.writes) == 0 {
		return out
	}
	byKey := map[string]KV{}
	for _, kv := range out {
		byKey[kv.Key] = kv
	}
	for k, w := range e.writes {
		if !strings.HasPrefix(k, prefix) || k < from {
			continue
		}
		if w == nil {
			delete(byKey, k)
		} else {
			byKey[k] = *w
		}
	}
	out = out[:0]
	for _, kv := range byKey {
		out = append(out, kv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// pageAt reads at most limit keys (0: all) under prefix from from on, at
// rev (0: the snapshot), in one range read with a limit: etcd answers the
// count of the whole range with it, so the keys after the page are counted
// without being sent.
func (e *etcdTx) pageAt(prefix, from string, rev, limit int64) ([]KV, int64, error) {
	if limit == 0 {
		kvs, err := e.rangeAt(prefix, from, rev, false)
		return kvs, 0, err
	}
	ep, err := e.b.key(prefix)
	if err != nil {
		return nil, 0, err
	}
	start := ep
	if from > prefix {
		if start, err = e.b.key(from); err != nil {
			return nil, 0, err
		}
	}
	opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(ep)), clientv3.WithLimit(limit)}
	if rev != 0 {
		opts = append(opts, clientv3.WithRev(rev))
	} else {
		opts = append(opts, e.at()...)
	}
	resp, err := e.b.cli.Get(e.ctx, start, opts...)
	if err != nil {
		return nil, 0, etcdError(err)
	}
	if rev == 0 {
		e.learn(resp.Header)
	}
	out := make([]KV, 0, len(resp.Kvs))
	for _, k := range resp.Kvs {
		out = append(out, e.b.kv(k))
	}
	return out, resp.Count - int64(len(out)), nil
}

// prefetch reads keys and prefixes at the snapshot in one round trip (a
// transaction of reads), for get and forEach to serve later.
func (e *etcdTx) prefetch(keys, prefixes []string) error {
	var ops []clientv3.Op
	for _, k := range keys {
		ek, err := e.b.key(k)
		if err != nil {
			return err
		}
		ops = append(ops, clientv3.OpGet(ek, e.at()...))
	}
	for _, p := range prefixes {
		ep, err := e.b.key(p)
		if err != nil {
			return err
		}
		ops = append(ops, clientv3.OpGet(ep, append([]clientv3.OpOption{clientv3.WithPrefix()}, e.at()...)...))
	}
	resp, err := e.b.cli.Txn(e.ctx).Then(ops...).Commit()
	if err != nil {
		return etcdError(err)
	}
	e.learn(resp.Header)
	if e.fetched == nil {
		e.fetched, e.fetchedRanges = map[string]*KV{}, map[string][]KV{}
	}
	for i, r := range resp.Responses {
		rr := r.GetResponseRange()
		if i < len(keys) {
			e.fetched[keys[i]] = nil
			if len(rr.Kvs) > 0 {
				kv := e.b.kv(rr.Kvs[0])
				e.fetched[keys[i]] = &kv
			}
			continue
		}
		kvs := make([]KV, 0, len(rr.Kvs))
		for _, k := range rr.Kvs {
			kvs = append(kvs, e.b.kv(k))
		}
		e.fetchedRanges[prefixes[i-len(keys)]] = kvs
	}
	return nil
}

// forEach ranges over prefix at the snapshot; the commit checks that no key
// under it changed meanwhile.
func (e *etcdTx) forEach(prefix string, fn func(KV) error) error {
	kvs, err := e.rangeAt(prefix, "", 0, true)
	if err != nil {
		return err
	}
	e.prefixes = append(e.prefixes, prefix)
	for _, kv := range kvs {
		if err := fn(kv); err != nil {
			return err
		}
	}
	return nil
}

// write buffers one write of key, after the checks the bbolt backend makes.
func (e *etcdTx) write(tx *Tx, doing, key string, value []byte, expectModRev int64, create bool) (KV, error) {
	if tx.readOnly {
		return KV{}, fmt.Errorf("%s %q: %w", doing, key, ErrReadOnly)
	}
	if _, err := e.b.key(key); err != nil {
		return KV{}, fmt.Errorf("%s %q: %w", doing, key, err)
	}
	if value == nil {
		return KV{}, fmt.Errorf("%s %q: value is nil: %w", doing, key, ErrBadKey)
	}
	if expectModRev < 0 {
		return KV{}, fmt.Errorf("%s %s: expected mod_revision %d: %w", doing, key, expectModRev, ErrBadRevision)
	}
	// A create need not read its key: the commit compares its
	// mod_revision with 0 (absent) anyway. If the commit fails, the
	// transaction runs again, and then reads it (recheck), to fail with
	// ErrExists if someone created it.
	_, wrote := e.writes[key]
	_, read := e.reads[key]
	if create && !e.recheck && !wrote && !read {
		if _, err := e.snapshot(); err != nil {
			return KV{}, fmt.Errorf("%s %s: %w", doing, key, err)
		}
		e.reads[key] = 0
		next := e.rev + 1
		kv := KV{Key: key, Value: append([]byte(nil), value...), CreateRevision: next, ModRevision: next, Version: 1}
		e.writes[key] = &kv
		tx.written = append(tx.written, key)
		return kv, nil
	}
	prev, ok, err := e.get(key)
	if err != nil {
		return KV{}, fmt.Errorf("%s %s: %w", doing, key, err)
	}
	next := e.rev + 1 // as the snapshot predicts it; OnCommit gets the real one
	switch {
	case create && ok:
		return KV{}, fmt.Errorf("%s %s: %w", doing, key, ErrExists)
	case create:
		kv := KV{Key: key, Value: append([]byte(nil), value...), CreateRevision: next, ModRevision: next, Version: 1}
		e.writes[key] = &kv
		tx.written = append(tx.written, key)
		return kv, nil
	case !ok:
		return KV{}, fmt.Errorf("%s %s: %w", doing, key, ErrNotFound)
	case expectModRev != 0 && prev.ModRevision != expectModRev:
		return KV{}, fmt.Errorf("%s %s: expected mod_revision %d, etcd has %d: %w", doing, key, expectModRev, prev.ModRevision, ErrConflict)
	}
	tx.written = append(tx.written, key)
	if doing == "deleting" {
		e.writes[key] = nil
		prev.ModRevision = next
		return prev, nil
	}
	kv := KV{Key: key, Value: append([]byte(nil), value...), CreateRevision: prev.CreateRevision, ModRevision: next, Version: prev.Version + 1}
	if prev.ModRevision > e.rev { // written earlier in this transaction
		kv.Version = prev.Version
	}
	e.writes[key] = &kv
	return kv, nil
}

// stat counts the keys under prefix and their newest mod_revision. Without
// writes of this transaction under prefix it is one small read: etcd counts
// the range, and sends only its newest key, without its value.
func (e *etcdTx) stat(prefix string) (int, int64, error) {
	written := false
	for k := range e.writes {
		written = written || strings.HasPrefix(k, prefix)
	}
	if !written {
		ep, err := e.b.key(prefix)
		if err != nil {
			return 0, 0, err
		}
		resp, err := e.b.cli.Get(e.ctx, ep, append(statOpts(), e.at()...)...)
		if err != nil {
			return 0, 0, etcdError(err)
		}
		e.learn(resp.Header)
		e.prefixes = append(e.prefixes, prefix)
		var newest int64
		if len(resp.Kvs) > 0 {
			newest = resp.Kvs[0].ModRevision
		}
		return int(resp.Count), newest, nil
	}
	var n int
	var max int64
	err := e.forEach(prefix, func(kv KV) error {
		n++
		if kv.ModRevision > max {
			max = kv.ModRevision
		}
		return nil
	})
	return n, max, err
}

func statOpts() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1)}
}

// statAll is stat of several prefixes, summed, in one round trip to etcd
// (a transaction of reads) when this transaction wrote under none of them.
// Unlike ForEach and Stat, the commit does not check that the prefixes
// stayed as they were.
func (e *etcdTx) statAll(prefixes []string) (int, int64, error) {
	var ops []clientv3.Op
	for _, p := range prefixes {
		for k := range e.writes {
			if strings.HasPrefix(k, p) {
				return e.statEach(prefixes)
			}
		}
		ep, err := e.b.key(p)
		if err != nil {
			return 0, 0, err
		}
		ops = append(ops, clientv3.OpGet(ep, append(statOpts(), e.at()...)...))
	}
	resp, err := e.b.cli.Txn(e.ctx).Then(ops...).Commit()
	if err != nil {
		return 0, 0, etcdError(err)
	}
	e.learn(resp.Header)
	// Not compared at the commit: a fingerprint (the API server's RBAC
	// policy's) is a cache key, and kube-apiserver's authorizer too decides
	// from a cache, outside the write's transaction. Every prefix compare
	// is a range etcd walks at each commit.
	var n int
	var newest int64
	for _, r := range resp.Responses {
		rr := r.GetResponseRange()
		n += int(rr.Count)
		if len(rr.Kvs) > 0 {
			newest = max(newest, rr.Kvs[0].ModRevision)
		}
	}
	return n, newest, nil
}

func (e *etcdTx) statEach(prefixes []string) (int, int64, error) {
	var n int
	var newest int64
	for _, p := range prefixes {
		c, m, err := e.stat(p)
		if err != nil {
			return 0, 0, err
		}
		n, newest = n+c, max(newest, m)
	}
	return n, newest, nil
}

// watch turns an etcd watch into a Watcher: a PUT of a new key is ADDED
// (create_revision = mod_revision), another PUT MODIFIED, a DELETE DELETED
// with the last value (etcd's prev_kv). If etcd goes away the client
// reconnects and resumes from the last revision delivered; a revision
// compacted meanwhile ends the watch with ErrCompacted.
func (b *etcdBackend) watch(ctx context.Context, prefix string, afterRev int64) (*Watcher, error) {
	ep, err := b.key(prefix)
	if err != nil {
		return nil, fmt.Errorf("watching %q: %w", prefix, err)
	}
	if afterRev < 0 {
		return nil, fmt.Errorf("watching %s from revision %d: %w", prefix, afterRev, ErrBadRevision)
	}
	// etcd says a revision is compacted in the watch's first response;
	// the bbolt backend says it at once, and so does this one: a read at
	// afterRev fails the same way.
	if afterRev > 0 {
		if _, err := b.cli.Get(ctx, ep, clientv3.WithRev(afterRev), clientv3.WithCountOnly()); err != nil {
			return nil, fmt.Errorf("watching %s from revision %d: %w", prefix, afterRev, etcdError(err))
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	ch := b.cli.Watch(wctx, ep, clientv3.WithPrefix(), clientv3.WithRev(afterRev+1), clientv3.WithPrevKV())
	w := &Watcher{events: make(chan Event, 128)}
	go func() {
		defer cancel()
		defer close(w.events)
		fail := func(err error) {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
		}
		for resp := range ch {
			if resp.CompactRevision != 0 {
				fail(fmt.Errorf("watching %s from revision %d: etcd compacted its history up to revision %d: %w",
					prefix, afterRev, resp.CompactRevision, ErrCompacted))
				return
			}
			if err := resp.Err(); err != nil {
				fail(fmt.Errorf("watching %s in etcd: %w", prefix, etcdError(err)))
				return
			}
			for _, ev := range resp.Events {
				select {
				case w.events <- b.event(ev):
				case <-ctx.Done():
					return
				}
			}
		}
		if ctx.Err() == nil {
			fail(fmt.Errorf("watching %s: etcd closed the watch", prefix))
		}
	}()
	return w, nil
}

func (b *etcdBackend) event(ev *clientv3.Event) Event {
	kv := b.kv(ev.Kv)
	out := Event{Revision: ev.Kv.ModRevision, KV: kv}
	if ev.PrevKv != nil {
		p := b.kv(ev.PrevKv)
		out.PrevKV = &p
	}
	switch {
	case ev.Type == clientv3.EventTypeDelete:
		out.Type = Deleted
		if out.PrevKV != nil {
			out.KV = *out.PrevKV
			out.KV.ModRevision = ev.Kv.ModRevision
		}
	case ev.IsCreate():
		out.Type = Added
	default:
		out.Type = Modified
	}
	return out
}

// trim compacts the history to keep about b.history revisions (WithHistory),
// once it holds a tenth more than that; etcd's own default is to keep it all.
func (b *etcdBackend) trim(ctx context.Context, rev int64) {
	if b.history == 0 {
		return
	}
	b.compactMu.Lock()
	defer b.compactMu.Unlock()
	if rev-b.compacted <= b.history+compactSlack(int(b.history)) {
		return
	}
	if b.compact(ctx, rev-b.history) == nil {
		b.compacted = rev - b.history
	}
}

// compact compacts etcd's history up to rev. A revision already compacted
// is not an error, as in the bbolt backend.
func (b *etcdBackend) compact(ctx context.Context, rev int64) error {
	if rev < 0 {
		return fmt.Errorf("compacting to revision %d: %w", rev, ErrBadRevision)
	}
	if rev == 0 {
		return nil
	}
	_, err := b.cli.Compact(ctx, rev)
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("compacting etcd to revision %d: %w", rev, etcdError(err))
	}
	return nil
}

// The backends a Store can have (Store.Backend).
const (
	BackendBolt = "bbolt"
	BackendEtcd = "etcd"
)

// EtcdEndpoints are the etcd client URLs of a store kept in etcd; nil for
// bbolt.
func (s *Store) EtcdEndpoints() []string {
	if s.etcd == nil {
		return nil
	}
	return append([]string(nil), s.etcd.endpoints...)
}

// Backend says where the store is kept: BackendBolt (a file, Open) or
// BackendEtcd (OpenEtcd).
func (s *Store) Backend() string {
	if s.etcd != nil {
		return BackendEtcd
	}
	return BackendBolt
}

// RunCompactor compacts etcd's history every interval, as kube-apiserver
// does (--etcd-compaction-interval, 5 minutes): each time to the revision
// it saw the time before, so that a watcher has at least one interval to
// catch up before the events it needs are gone (then it gets 410 Gone and
// lists again). report, if not nil, is told of each compaction. It returns
// when ctx ends. The bbolt backend keeps its own bounded history
// (WithHistory): there RunCompactor returns at once.
func (s *Store) RunCompactor(ctx context.Context, interval time.Duration, report func(rev int64, err error)) {
	if s.etcd == nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if last > 0 {
			err := s.etcd.compact(ctx, last)
			if report != nil {
				report(last, err)
			}
		}
		if rev, err := s.etcd.revision(ctx); err == nil {
			last = rev
		}
	}
}
