package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/podlab/podlab/steps/apiserver"
	"github.com/podlab/podlab/steps/apiserver/rest"
	"github.com/podlab/podlab/steps/statedir"
	"github.com/podlab/podlab/steps/store"
)

var storeCommand = &cli.Command{
	Name:      "store",
	Usage:     "read the API server's store (etcd's role) as etcdctl does: get, list, watch, compact",
	ArgsUsage: "get KEY | list PREFIX | watch PREFIX | compact REV",
	Description: `Everything a cluster knows lives in etcd, and only the API server talks to
it: kubectl, the controllers, the scheduler and the kubelets all go through
the API server. podlab's store plays etcd's role in one bbolt file,
<state-dir>/etcd/store.db (bbolt is etcd's own storage engine). These
subcommands read it directly, as an administrator runs etcdctl, to show
what the API server wrote.

Keys. Every object is one key: /registry/<resource>/<namespace>/<name>,
such as /registry/pods/default/web (cluster-scoped objects, like
namespaces, have no namespace part: /registry/namespaces/default). The value
is the object in protobuf, as kube-apiserver writes it: "k8s\x00", then a
runtime.Unknown that names the apiVersion and kind and wraps the object's
own protobuf. etcdctl shows those bytes as they are; podlab shows the
first of them, then decodes them (as the auger tool does for etcd).

The WAL. Like etcd, the store makes each write durable by appending it to
a write-ahead log, <state-dir>/etcd/store.db.wal, and fsyncing that, and
commits the bbolt file once per burst of writes (when the process lets go
of the file). A process that dies first loses nothing: the next one to
open the store replays the log.

Revisions. The store counts every write transaction: its revision. Each key
keeps create_revision (the write that created it), mod_revision (its last
write) and version (writes since creation). The resourceVersion kubectl
shows is the key's mod_revision. An update must send back the
resourceVersion it read: if the key moved since, it is a 409 Conflict, and
the client reads again and retries.

Watch. Each write also appends an event (ADDED, MODIFIED, DELETED) to a
log, keyed by revision. Controllers LIST, note the list's revision, then
WATCH from it, and so miss nothing. Watch sees writes from every process.

Compaction. The log keeps the last 10000 events; older ones are compacted
away (etcd is compacted by the API server every 5 minutes). A watch from a
compacted revision fails, Kubernetes answers 410 Gone, and the client lists
again. Compaction removes history, never the keys themselves.

  get KEY            one key: its revisions, version and value
  list PREFIX        every key under PREFIX (default /), in key order (--rev N: as at N)
  watch PREFIX       events as they happen (--rev N replays those after N)
  compact REV        remove the log's events up to revision REV

Examples:
  podlab store list /registry/ --keys-only
  podlab store get /registry/pods/default/web -o json
  podlab store watch /registry/pods/ --rev 0
  podlab store compact 10`,
	Subcommands: []*cli.Command{storeGetCommand, storeListCommand, storeWatchCommand, storeCompactCommand},
}

var storeGetCommand = &cli.Command{
	Name:      "get",
	Usage:     "print one key: create_revision, mod_revision, version and its raw value",
	ArgsUsage: "KEY [-o json]",
	Description: `Reads one key, such as /registry/pods/default/web. mod_revision is the
object's resourceVersion. The value is protobuf, as in etcd: its first
bytes are printed escaped, then the object decoded, as JSON.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: `"json" prints {key, create_revision, mod_revision, version, value (base64, as etcdctl -w json), object (decoded)}`},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() != 1 {
			return errors.New("podlab store get needs one key: podlab store get /registry/pods/default/web")
		}
		if o := c.String("output"); o != "" && o != "json" {
			return fmt.Errorf("-o %s: podlab store get prints text, or json with -o json", o)
		}
		st, err := openStore(c)
		if err != nil {
			return err
		}
		defer st.Close()
		key := c.Args().First()
		var kv store.KV
		var found bool
		var rev int64
		err = st.View(c.Context, func(tx *store.Tx) error {
			rev = tx.Revision()
			kv, found, err = tx.Get(key)
			return err
		})
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("no key %s in %s (at revision %d): see the keys with `podlab store list / --keys-only`: %w",
				key, st.Path(), rev, store.ErrNotFound)
		}
		if c.String("output") == "json" {
			return printKVJSON(c.App.Writer, kv)
		}
		printKV(c.App.Writer, st.Path(), rev, kv)
		return nil
	},
}

var storeListCommand = &cli.Command{
	Name:      "list",
	Usage:     "print every key under a prefix, with its revisions (and value)",
	ArgsUsage: "[PREFIX] [--keys-only]",
	Description: `Reads every key that starts with PREFIX (default /), in key order, in one
read transaction: a consistent snapshot at one revision, as a Kubernetes
LIST is. /registry/pods/ is every pod; /registry/pods/default/ the pods of
one namespace.

--rev N reads the keys as they were at revision N (etcdctl get --rev):
the store keeps every revision after the compacted one, and the API
server reads the later pages of a list (kubectl get's chunks of 500) at
the first page's revision this way, so that the pages are one snapshot.`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "keys-only", Usage: "print keys and revisions, not values"},
		&cli.Int64Flag{Name: "rev", Usage: "read the keys as they were at revision `N`", DefaultText: "the current revision"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() > 1 {
			return errors.New("podlab store list takes one prefix: podlab store list /registry/pods/")
		}
		prefix := "/"
		if c.NArg() == 1 {
			prefix = c.Args().First()
		}
		st, err := openStore(c)
		if err != nil {
			return err
		}
		defer st.Close()
		return st.View(c.Context, func(tx *store.Tx) error {
			return printList(c.App.Writer, st.Path(), prefix, c.Int64("rev"), c.Bool("keys-only"), tx)
		})
	},
}

var storeWatchCommand = &cli.Command{
	Name:      "watch",
	Usage:     "print events under a prefix as they happen, until Ctrl-C",
	ArgsUsage: "[PREFIX] [--rev N]",
	Description: `Watches every key that starts with PREFIX (default /) and prints each event:
its type (ADDED, MODIFIED, DELETED), revision and key. Without --rev it
starts at the current revision and prints only new events; --rev N first
replays the events after revision N that the log still holds, as a
Kubernetes watch from resourceVersion N does. Writes by other podlab
processes show up too (the watcher learns of them through inotify).`,
	Flags: []cli.Flag{
		&cli.Int64Flag{Name: "rev", Usage: "replay the events after revision `N` (0: the whole log)", DefaultText: "the current revision: only new events"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() > 1 {
			return errors.New("podlab store watch takes one prefix: podlab store watch /registry/pods/")
		}
		prefix := "/"
		if c.NArg() == 1 {
			prefix = c.Args().First()
		}
		st, err := openStore(c)
		if err != nil {
			return err
		}
		defer st.Close()
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		defer stop()
		rev := c.Int64("rev")
		if !c.IsSet("rev") {
			if rev, err = st.Revision(ctx); err != nil {
				return err
			}
		}
		w, err := st.Watch(ctx, prefix, rev)
		if err != nil {
			return watchError(err)
		}
		out := c.App.Writer
		fmt.Fprintf(out, "watching %s in %s, events after revision %d (Ctrl-C to stop)\n", prefix, st.Path(), rev)
		for ev := range w.Events() {
			printEvent(out, ev)
		}
		if err := w.Err(); err != nil {
			return watchError(err)
		}
		fmt.Fprintln(out, "stopped")
		return nil
	},
}

var storeCompactCommand = &cli.Command{
	Name:      "compact",
	Usage:     "remove the log's events up to a revision",
	ArgsUsage: "REV",
	Description: `Removes the events of revisions up to and including REV from the log. The keys
are untouched: only history goes. Watches from before REV then fail with
"required revision has been compacted" (410 Gone in Kubernetes), and their
clients list again. The store also compacts by itself, keeping the last
10000 events.

Compacting writes to the store, and only the API server writes to etcd:
while this state directory's ` + "`podlab apiserver`" + ` runs, compact refuses (stop
the API server first); get, list and watch still read the store beside it.`,
	Action: func(c *cli.Context) error {
		if c.NArg() != 1 {
			return errors.New("podlab store compact needs a revision: podlab store compact 10")
		}
		rev, err := strconv.ParseInt(c.Args().First(), 10, 64)
		if err != nil {
			return fmt.Errorf("podlab store compact %s: the revision is a number, such as a resourceVersion", c.Args().First())
		}
		release, err := claimStoreForWrite(c, "compact")
		if err != nil {
			return err
		}
		defer release()
		st, err := openStore(c)
		if err != nil {
			return err
		}
		defer st.Close()
		var r compaction
		if _, err := st.Update(c.Context, func(tx *store.Tx) error {
			r.before = tx.CompactedRevision()
			r.removed, err = tx.Compact(rev)
			r.after, r.events, r.current = tx.CompactedRevision(), tx.Events(), tx.Revision()
			return err
		}); err != nil {
			return err
		}
		printCompaction(c.App.Writer, st.Path(), r)
		return nil
	},
}

// openStore opens the store of the state directory, which `podlab init`
// creates; it never creates one.
func openStore(c *cli.Context) (*store.Store, error) {
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	path := store.Path(dir)
	errw := c.App.ErrWriter
	st, err := store.Open(path, store.MustExist(), store.WithWaitNotice(func(time.Duration) {
		fmt.Fprintln(errw, "waiting for the store: another podlab process holds it")
	}))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no store at %s: run `podlab init` first", path)
	}
	return st, err
}

// claimStoreForWrite takes the API server's claim on the store (the lock
// `podlab apiserver` holds while it serves) for a subcommand that writes,
// so that no API server starts during the write either. While one
// serves, it refuses: as with etcd, writes go through the API server.
func claimStoreForWrite(c *cli.Context, sub string) (release func(), err error) {
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	release, err = rest.ClaimStore(statedir.Layout{Dir: dir}.APIServerLock())
	if errors.Is(err, rest.ErrStoreServed) {
		return nil, fmt.Errorf("podlab store %s writes to the store, and %w.\n"+
			"While the API server runs, writes go through it (kubectl, or podlab's clients with --kubeconfig), "+
			"and it compacts the store itself; podlab store get, list and watch still read the store beside it.\n"+
			"To %s by hand, stop podlab apiserver (Ctrl-C where it runs, or kill the pid above), then run this again", sub, err, sub)
	}
	return release, err
}

func printKV(w io.Writer, path string, rev int64, kv store.KV) {
	fmt.Fprintf(w, "store            %s (at revision %d)\n", path, rev)
	fmt.Fprintf(w, "key              %s\n", kv.Key)
	fmt.Fprintf(w, "create_revision  %d  (the write that created it)\n", kv.CreateRevision)
	fmt.Fprintf(w, "mod_revision     %d  (its last write: the object's resourceVersion)\n", kv.ModRevision)
	fmt.Fprintf(w, "version          %d  (writes since it was created)\n", kv.Version)
	obj, encoding, err := apiserver.DecodeStored(kv.Value)
	switch {
	case err != nil:
		fmt.Fprintf(w, "value            %d bytes, which podlab cannot decode (%v):\n", len(kv.Value), err)
		fmt.Fprintln(w, printableBytes(kv.Value))
	case encoding == "protobuf":
		fmt.Fprintf(w, "value            %d bytes of protobuf, as kube-apiserver writes to etcd: %q, then a\n", len(kv.Value), apiserver.StorageMagic)
		fmt.Fprintf(w, "                 runtime.Unknown naming %s %s and holding the object (first %d bytes):\n",
			obj.GetObjectKind().GroupVersionKind().GroupVersion(), obj.GetObjectKind().GroupVersionKind().Kind, min(len(kv.Value), valuePreview))
		fmt.Fprintln(w, escapeBytes(kv.Value, valuePreview))
		fmt.Fprintln(w, "decoded, as JSON:")
		printObjectJSON(w, obj)
	default:
		fmt.Fprintf(w, "value            %d bytes of JSON (stored by an older podlab):\n", len(kv.Value))
		printObjectJSON(w, obj)
	}
}

// valuePreview is how many bytes of a protobuf value `store get` shows.
const valuePreview = 48

// escapeBytes prints up to n bytes as Go escapes them in a string, as
// etcdctl's output of a protobuf value looks once made printable.
func escapeBytes(b []byte, n int) string {
	q := strconv.Quote(string(b[:min(n, len(b))]))
	q = q[1 : len(q)-1]
	if n < len(b) {
		q += "…"
	}
	return q
}

// printableBytes is b as it is when it is text, else escaped.
func printableBytes(b []byte) string {
	if utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) {
		return string(b)
	}
	return escapeBytes(b, len(b))
}

// printObjectJSON prints a decoded object on one line, as kubectl get -o json
// would without indentation.
func printObjectJSON(w io.Writer, obj apiserver.Object) {
	b, err := json.Marshal(obj)
	if err != nil {
		fmt.Fprintf(w, "(cannot print it: %v)\n", err)
		return
	}
	fmt.Fprintf(w, "%s\n", b)
}

// printKVJSON prints the key as etcdctl -w json does (the value in base64),
// with the decoded object beside it.
func printKVJSON(w io.Writer, kv store.KV) error {
	out := struct {
		Key            string `json:"key"`
		CreateRevision int64  `json:"create_revision"`
		ModRevision    int64  `json:"mod_revision"`
		Version        int64  `json:"version"`
		Value          []byte `json:"value"`
		Encoding       string `json:"encoding,omitempty"`
		Object         any    `json:"object,omitempty"`
	}{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Value: kv.Value}
	if obj, encoding, err := apiserver.DecodeStored(kv.Value); err == nil {
		out.Encoding, out.Object = encoding, obj
	}
	return json.NewEncoder(w).Encode(out)
}

func printList(w io.Writer, path, prefix string, rev int64, keysOnly bool, tx *store.Tx) error {
	switch {
	case rev != 0 && rev < tx.CompactedRevision():
		return fmt.Errorf("--rev %d: the store is compacted up to revision %d, and keeps no older state (Kubernetes answers 410 Gone): list at a revision from %d to %d: %w",
			rev, tx.CompactedRevision(), tx.CompactedRevision(), tx.Revision(), store.ErrCompacted)
	case rev < 0 || rev > tx.Revision():
		return fmt.Errorf("--rev %d: the store is at revision %d: list at a revision from %d to %d", rev, tx.Revision(), tx.CompactedRevision(), tx.Revision())
	}
	fmt.Fprintf(w, "store %s: revision %d, compacted up to revision %d (the log holds %s)\n",
		path, tx.Revision(), tx.CompactedRevision(), counted(tx.Events(), "event"))
	if rev != 0 {
		fmt.Fprintf(w, "the keys as they were at revision %d\n", rev)
	}
	fmt.Fprintln(w)
	n := 0
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if keysOnly {
		fmt.Fprintln(tw, "KEY\tCREATE_REVISION\tMOD_REVISION\tVERSION\tBYTES")
	}
	err := tx.ForEachAt(prefix, "", rev, func(kv store.KV) error {
		n++
		if keysOnly {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", kv.Key, kv.CreateRevision, kv.ModRevision, kv.Version, len(kv.Value))
			return nil
		}
		fmt.Fprintf(w, "%s  create_revision=%d mod_revision=%d version=%d (%d bytes)\n", kv.Key, kv.CreateRevision, kv.ModRevision, kv.Version, len(kv.Value))
		if obj, _, err := apiserver.DecodeStored(kv.Value); err == nil {
			printObjectJSON(w, obj)
		} else {
			fmt.Fprintln(w, printableBytes(kv.Value))
		}
		fmt.Fprintln(w)
		return nil
	})
	if err != nil {
		return err
	}
	tw.Flush()
	if keysOnly && n > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%s under %s\n", counted(int64(n), "key"), prefix)
	return nil
}

func printEvent(w io.Writer, ev store.Event) {
	fmt.Fprintf(w, "%-8s  revision %-6d  %s  (version %d, %d bytes)\n",
		ev.Type, ev.Revision, ev.KV.Key, ev.KV.Version, len(ev.KV.Value))
}

func watchError(err error) error {
	if errors.Is(err, store.ErrCompacted) {
		return fmt.Errorf("%w (Kubernetes answers 410 Gone): watch from a newer --rev, or without --rev", err)
	}
	return err
}

type compaction struct {
	before, after, current int64
	events                 int64
	removed                int
}

func printCompaction(w io.Writer, path string, r compaction) {
	if r.removed == 0 && r.after == r.before {
		fmt.Fprintf(w, "nothing to compact: %s is already compacted up to revision %d\n", path, r.before)
	} else {
		fmt.Fprintf(w, "compacted %s up to revision %d: removed %s (revisions %d to %d)\n",
			path, r.after, counted(int64(r.removed), "event"), r.before+1, r.after)
		fmt.Fprintf(w, "watches from before revision %d now fail (410 Gone); every key is still there\n", r.after)
	}
	if r.events > 0 {
		fmt.Fprintf(w, "the log holds %s, revisions %d to %d; the store is at revision %d\n",
			counted(r.events, "event"), r.after+1, r.current, r.current)
	} else {
		fmt.Fprintf(w, "the log is empty; the store is at revision %d\n", r.current)
	}
}

func counted(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
