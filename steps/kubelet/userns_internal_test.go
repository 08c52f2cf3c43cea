package kubelet

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// writeRaw puts a userns record for uid on node by hand.
func writeRaw(t *testing.T, l Layout, uid types.UID, body string) {
	t.Helper()
	p := l.UserNamespaceFile(uid)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLayout_AllocateUserNamespace(t *testing.T) {
	r := usernsRanges{first: 1, count: 3}
	tests := []struct {
		name     string
		existing map[types.UID]uint32 // pods on node-1 with their bases
		other    map[types.UID]uint32 // pods on node-2
		pod      types.UID
		want     uint32
	}{
		{"the first pod gets the first range above the host's ids", nil, nil, "a", 65536},
		{"the lowest free range", map[types.UID]uint32{"a": 65536, "c": 196608}, nil, "b", 131072},
		{"a recorded pod keeps its range", map[types.UID]uint32{"a": 65536, "b": 196608}, nil, "b", 196608},
		{"another node's pods count: one machine", nil, map[types.UID]uint32{"x": 65536}, "a", 131072},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			l1, l2 := mustNodeLayout(t, state, "node-1"), mustNodeLayout(t, state, "node-2")
			for l, pods := range map[Layout]map[types.UID]uint32{l1: tt.existing, l2: tt.other} {
				for uid, base := range pods {
					m := IDMapping{HostID: base, Length: UserNamespaceLength}
					if err := writeRecord(l.UserNamespaceFile(uid), UserNamespace{UIDMappings: []IDMapping{m}, GIDMappings: []IDMapping{m}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			u, err := l1.allocateUserNamespace(tt.pod, r)
			if err != nil {
				t.Fatal(err)
			}
			if u.Base() != tt.want || u.UIDMappings[0] != u.GIDMappings[0] || u.UIDMappings[0].Length != 65536 || u.UIDMappings[0].ContainerID != 0 {
				t.Errorf("got %+v, want base %d", u, tt.want)
			}
			// Recorded: asked again (a kubelet restart), the same range.
			again, err := l1.allocateUserNamespace(tt.pod, r)
			if err != nil || again.Base() != u.Base() {
				t.Errorf("asked again: %+v, %v; want base %d", again, err, u.Base())
			}
		})
	}
}

// Removing the pod's directory (what RemoveStage does) frees its range.
func TestLayout_AllocateUserNamespace_FreedWithPodDir(t *testing.T) {
	l := mustNodeLayout(t, t.TempDir(), "node-1")
	r := usernsRanges{first: 1, count: 1}
	if _, err := l.allocateUserNamespace("a", r); err != nil {
		t.Fatal(err)
	}
	if _, err := l.allocateUserNamespace("b", r); !errors.Is(err, ErrUserNamespacesExhausted) {
		t.Fatalf("error %v, want ErrUserNamespacesExhausted", err)
	}
	if err := os.RemoveAll(l.PodDir("a")); err != nil {
		t.Fatal(err)
	}
	if u, err := l.allocateUserNamespace("b", r); err != nil || u.Base() != 65536 {
		t.Fatalf("after pod a went: %+v, %v; want its range 65536", u, err)
	}
}

func TestLayout_AllocateUserNamespace_BadInput(t *testing.T) {
	good := `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`
	tests := []struct {
		name string
		pod  types.UID // whose record is bad
		body string
		want error
	}{
		{"every range taken", "other", good, ErrUserNamespacesExhausted},
		{"not JSON", "other", "{", ErrUserNamespaceRecord},
		{"its own record corrupt", "new", "garbage", ErrUserNamespaceRecord},
		{"no mapping", "other", `{"uidMappings":[],"gidMappings":[]}`, ErrUserNamespaceRecord},
		{"uid and gid differ", "other", `{"uidMappings":[{"hostId":65536,"length":65536}],"gidMappings":[{"hostId":131072,"length":65536}]}`, ErrUserNamespaceRecord},
		{"root not mapped", "other", `{"uidMappings":[{"hostId":65536,"containerId":1,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":1,"length":65536}]}`, ErrUserNamespaceRecord},
		{"the host's own ids", "other", `{"uidMappings":[{"hostId":0,"length":65536}],"gidMappings":[{"hostId":0,"length":65536}]}`, ErrUserNamespaceRecord},
		{"not a whole range", "other", `{"uidMappings":[{"hostId":65536,"length":1000}],"gidMappings":[{"hostId":65536,"length":1000}]}`, ErrUserNamespaceRecord},
		{"not aligned", "other", `{"uidMappings":[{"hostId":70000,"length":65536}],"gidMappings":[{"hostId":70000,"length":65536}]}`, ErrUserNamespaceRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustNodeLayout(t, t.TempDir(), "node-1")
			writeRaw(t, l, tt.pod, tt.body)
			_, err := l.allocateUserNamespace("new", usernsRanges{first: 1, count: 1})
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if tt.pod != "new" {
				if _, err := os.Stat(l.UserNamespaceFile("new")); !os.IsNotExist(err) {
					t.Errorf("a record was written for the refused pod: %v", err)
				}
			}
		})
	}
}

func TestCheckRuncForUserNamespaces(t *testing.T) {
	tests := []struct {
		version string
		ok      bool
	}{
		{"1.5.3", true},
		{"1.2.0", true},
		{"1.2.0-rc.1", true},
		{"2.0.0", true},
		{"1.1.5", false},
		{"1.1.15", false},
		{"unknown", false},
		{"", false},
		{"1.x.0", false},
	}
	for _, tt := range tests {
		err := checkRuncForUserNamespaces(tt.version)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrUserNamespacesUnsupported)) {
			t.Errorf("runc %q: error %v, want ok=%v", tt.version, err, tt.ok)
		}
	}
}

// mustNodeLayout is node's layout under the state directory state.
func mustNodeLayout(t *testing.T, state, node string) Layout {
	t.Helper()
	l, err := NodeLayout(state, node)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
