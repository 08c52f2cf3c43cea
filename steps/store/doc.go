// Package store plays etcd's role: the database behind the Kubernetes API
// server, and the only place the cluster's state lives. Only the API server
// (steps/apiserver) opens it, as only kube-apiserver talks to etcd; every
// other component (kubectl, controllers, scheduler, kubelet) goes through
// the API server.
//
// Keys. Every object is one key, /registry/<resource>/<namespace>/<name>
// (/registry/pods/default/web; cluster-scoped objects drop the namespace),
// and its value is the object serialized, as bytes this package never
// interprets. Listing pods in a namespace is reading every key under the
// prefix /registry/pods/default/.
//
// Revisions. The store has one counter, the revision, that every write
// transaction advances by one (all the keys one transaction writes get the
// same revision). Each key remembers its CreateRevision, its ModRevision
// (the revision of its last write) and its Version (how many writes since
// it was created). The resourceVersion kubectl shows on an object is its
// key's ModRevision, and the one on a list is the store's revision when it
// was read. An update sends back the resourceVersion it read; if the key's
// ModRevision moved since, someone else wrote first and the update fails
// with ErrConflict (409 Conflict): optimistic concurrency, no locks held
// between a read and a write.
//
// Watch. Every write is recorded as an event (ADDED, MODIFIED, DELETED),
// in the same transaction, keyed by revision: the history. A watch from
// revision R reads the history after R, then waits for more: this is how
// controllers, the scheduler and kubelets learn of changes without polling
// the objects. The pattern every Kubernetes client follows: LIST (and note
// the list's revision), then WATCH from it, so that nothing is missed
// between the two.
//
// Compaction. The history cannot grow forever. etcd keeps it until the API
// server compacts it (every 5 minutes by default); here the store keeps the
// last N events (WithHistory, 10000 by default) and Compact removes older
// ones on request. A watch from a compacted revision fails with
// ErrCompacted (Kubernetes: 410 Gone, "too old resource version"), and the
// client lists again. Compaction never removes a key's current value, however
// old its revision: as in etcd, it removes the values that were replaced
// and the deleted keys, and keeps the state at the compacted revision.
//
// Reading the past. Until compaction passes it, the state at any revision
// can be read again (Tx.ForEachAt, etcd's range read "with revision"):
// the current keys, minus what the history after that revision changed,
// plus the values those writes replaced. kube-apiserver reads the later
// pages of a list (limit, continue) at the first page's revision this
// way, so that a list in pages is one consistent snapshot.
//
// The file. It is one bbolt file (etcd's own storage engine), by default
// <state-dir>/etcd/store.db, and beside it a write-ahead log,
// store.db.wal, as etcd has one: each write is fsync'd to the log before
// Update returns, so an acknowledged write survives a crash, and the
// writes of a burst are committed to the bbolt file together (see wal.go).
//
// Group commit. An fsync takes about 2ms on the project's disk: one per
// write, taken in turn, would cap the store near 500 writes a second. So
// concurrent writers share them, as etcd's backend and WAL batch theirs.
// Each Update runs its transaction and writes its WAL record under the
// store's lock, one writer at a time (so ErrConflict still catches two
// writers of one key, and revisions stay strictly increasing), then lets go
// of the lock and waits for an fsync that covers its record: the first
// writer to wait leads one, and writers that arrive while it runs are
// covered together by the next. Update returns, and Tx.OnDurable's
// functions run, only once that fsync has returned; a View or a watch that
// saw a write not yet durable waits for it too. A crash loses only writes
// nobody was told of, and each of those whole (group.go tells how).
// Several podlab processes share the file, and bbolt locks it while it is
// open, so each operation opens it and a process lets go of it (committing
// its batch) a few milliseconds after its last operation (see lock.go).
// Watchers in other processes learn of writes through inotify.
//
// Inside the file, etcd's design: every value is stored once. Bucket "kv"
// holds two keyspaces, told apart by their first byte. revs ('r' +
// revision + sub-index) maps each write to its record (its type, key,
// counters and the value it wrote; a deletion keeps the last value, for
// watchers): it is at once the history watches read and where the values
// live. keys ('k' + key) maps each live key to its counters and the
// revision of its value in revs (etcd keeps this index in memory and
// rebuilds it at start; podlab reopens the file for every burst of
// operations, so it is on disk). A read follows keys into revs. Both share
// one B-tree, so that a write dirties as few pages as it can: every page a
// commit writes costs an fsync'd disk write. Bucket "meta" holds the
// revision, the compacted revision, the event count and the file's layout
// ("podlab-store/3"; Open refuses other layouts with ErrLayout).
// `podlab store get|list|watch|compact` shows them, as etcdctl does.
//
// Or a real etcd. OpenEtcd gives the same Store and Tx over an etcd
// server (podlab apiserver --etcd-servers; etcd.go tells how): the same
// keys and values, so that etcdctl shows, under /registry, what a real
// cluster's etcd holds, and etcd's own counters (resourceVersion = etcd's
// mod_revision). A transaction reads at one revision, buffers its writes,
// and commits them in one etcd Txn that compares the mod_revision of what
// it read, running again when that changed, as etcd's concurrency.STM
// does; the revision its writes got comes with the commit (Tx.OnCommit).
// Watches are etcd's, with prev_kv; compaction is etcd's, which the API
// server asks for every 5 minutes (RunCompactor), as kube-apiserver does.
// What is the file's alone (the WAL, group commit, inotify, the lock)
// has no meaning there: etcd has its own raft log, batches its own fsyncs,
// and notifies its watchers itself.
package store
