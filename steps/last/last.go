// Package last keeps a small record of what the last by-hand stage made,
// so that a learner can type the chain as it reads,
//
//	podlab pull nginx
//	podlab unpack
//	podlab spec
//	podlab runc run -d
//
// and each stage takes what the one before it made when its argument is
// left out: the image pulled last, the bundle unpacked last, the bundle
// whose spec was written last, the container created last. An argument
// given always wins. The record is one JSON file in the state directory
// (statedir.Layout.LastMade), replaced whole on each update, so that a
// reader never sees half of it. It remembers names and paths only: what
// they point at may have been removed since, and the caller checks.
//
// Kubernetes keeps no such record: the kubelet passes each CRI call what
// the one before it returned (PullImage's image ref to CreateContainer,
// CreateContainer's container id to StartContainer). The record plays that
// hand-over for a person typing the calls one at a time.
package last

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Record is what the last by-hand stages made. A zero field means that
// stage has not run since the state directory was made (or reset).
type Record struct {
	// Pulled is the image podlab pull stored last, as it was typed
	// ("nginx").
	Pulled string `json:"pulled,omitempty"`
	// Unpacked is the bundle podlab unpack made last; UnpackedImage the
	// image it was unpacked from.
	Unpacked      string `json:"unpacked,omitempty"`
	UnpackedImage string `json:"unpackedImage,omitempty"`
	// Spec is the bundle whose config.json podlab spec wrote last; SpecID
	// the container id the spec was written for.
	Spec   string `json:"spec,omitempty"`
	SpecID string `json:"specID,omitempty"`
	// Created is the container podlab runc create (or run --detach) made
	// last, and Runtime the runtime (handler) that made it ("" for runc).
	Created string `json:"created,omitempty"`
	Runtime string `json:"runtime,omitempty"`
}

// ErrBadRecord is returned by Load when the file is not a record: it is
// safe to remove (rm FILE); the next stage writes a new one.
var ErrBadRecord = errors.New("not a record of the last stages")

// Load reads the record at path; a missing file is an empty record.
func Load(path string) (Record, error) {
	var r Record
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("reading what the last stage made: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("%w: %s: %v (remove it: rm %s)", ErrBadRecord, path, err, path)
	}
	return r, nil
}

// Update reads the record at path, lets change change it, and writes it
// back whole (a temporary file renamed over it).
func Update(path string, change func(*Record)) error {
	r, err := Load(path)
	if errors.Is(err, ErrBadRecord) {
		r, err = Record{}, nil // a damaged record is replaced
	}
	if err != nil {
		return err
	}
	change(&r)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("recording what this stage made: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".last-*.json")
	if err != nil {
		return fmt.Errorf("recording what this stage made: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("recording what this stage made: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("recording what this stage made: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("recording what this stage made: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("recording what this stage made: %w", err)
	}
	return nil
}
