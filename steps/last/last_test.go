package last_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/podlab/podlab/steps/last"
)

func TestRecord_Load_Missing(t *testing.T) {
	r, err := last.Load(filepath.Join(t.TempDir(), "last.json"))
	if err != nil || r != (last.Record{}) {
		t.Fatalf("Load of a missing file = %+v, %v; want an empty record", r, err)
	}
}

func TestRecord_Update_KeepsOtherFields(t *testing.T) {
	p := filepath.Join(t.TempDir(), "last.json")
	if err := last.Update(p, func(r *last.Record) { r.Pulled = "nginx" }); err != nil {
		t.Fatal(err)
	}
	if err := last.Update(p, func(r *last.Record) { r.Unpacked, r.UnpackedImage = "/b/nginx", "nginx" }); err != nil {
		t.Fatal(err)
	}
	r, err := last.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	want := last.Record{Pulled: "nginx", Unpacked: "/b/nginx", UnpackedImage: "nginx"}
	if r != want {
		t.Fatalf("record = %+v, want %+v", r, want)
	}
}

func TestRecord_Load_Damaged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "last.json")
	if err := os.WriteFile(p, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := last.Load(p); !errors.Is(err, last.ErrBadRecord) {
		t.Fatalf("Load of a damaged file: %v, want ErrBadRecord", err)
	}
	// The next stage replaces it.
	if err := last.Update(p, func(r *last.Record) { r.Created = "nginx" }); err != nil {
		t.Fatal(err)
	}
	if r, err := last.Load(p); err != nil || r.Created != "nginx" {
		t.Fatalf("after Update: %+v, %v", r, err)
	}
}
