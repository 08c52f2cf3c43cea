package runc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"
	"time"
)

// Listed is one container as `runc list --format json` describes it: the
// OCI runtime's own view of its root directory (one state.json per
// container), with the fields and JSON names runc uses.
type Listed struct {
	Version     string            `json:"ociVersion"`
	ID          string            `json:"id"`
	Pid         int               `json:"pid"`
	Status      string            `json:"status"`
	Bundle      string            `json:"bundle"`
	Rootfs      string            `json:"rootfs"`
	Created     time.Time         `json:"created"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Owner       string            `json:"owner"`
}

// List runs `runc list --format json` on the Runtime's root and returns
// every container the OCI runtime knows there, in runc's order (by ID).
// A root that does not exist yet (nothing was created on this state
// directory) lists nothing, without running the runtime: runc itself
// fails on a --root that does not exist.
func (r *Runtime) List(ctx context.Context) ([]Listed, error) {
	if err := r.checkBinary(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(r.RootDir()); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	out, err := r.output(ctx, "list", "--format", "json")
	if err != nil {
		return nil, fmt.Errorf("listing the containers under %s: %w", r.RootDir(), err)
	}
	var ls []Listed
	if err := json.Unmarshal(out, &ls); err != nil {
		return nil, fmt.Errorf("listing the containers under %s: reading %s list's JSON: %w", r.RootDir(), r.Binary, err)
	}
	return ls, nil
}

// WriteListTable writes ls as `runc list` prints its table: ID, PID,
// STATUS, BUNDLE, CREATED (RFC 3339, nanoseconds) and OWNER, aligned with
// runc's own tabwriter settings.
func WriteListTable(w io.Writer, ls []Listed) error {
	tw := tabwriter.NewWriter(w, 12, 1, 3, ' ', 0)
	fmt.Fprint(tw, "ID\tPID\tSTATUS\tBUNDLE\tCREATED\tOWNER\n")
	for _, c := range ls {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", c.ID, c.Pid, c.Status, c.Bundle, c.Created.Format(time.RFC3339Nano), c.Owner)
	}
	return tw.Flush()
}

// WriteListJSON writes ls as `runc list --format json` does: one JSON
// array and a newline (null when there is no container, as runc prints).
func WriteListJSON(w io.Writer, ls []Listed) error {
	return json.NewEncoder(w).Encode(ls)
}
