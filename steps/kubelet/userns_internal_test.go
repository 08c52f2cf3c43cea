package kubelet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/steps/statedir"
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

// mustNodeLayout is node's layout under the state directory state, with
// the machine-wide claims in state/userns-claims: the tests' allocations do
// not meet the machine's.
func mustNodeLayout(t *testing.T, state, node string) Layout {
	t.Helper()
	l, err := NodeLayout(state, node)
	if err != nil {
		t.Fatal(err)
	}
	l.Claims = statedir.UsernsClaims{Dir: filepath.Join(state, "userns-claims")}
	return l
}

// claimBases are the bases claimed in claims.
func claimBases(t *testing.T, claims statedir.UsernsClaims) []uint32 {
	t.Helper()
	all, err := readClaims(claims)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint32
	for b := range all {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

// Two state directories on one machine allocating at once never hand out
// the same range: host ids are the machine's.
func TestLayout_AllocateUserNamespace_TwoStateDirs(t *testing.T) {
	claims := statedir.UsernsClaims{Dir: t.TempDir()}
	const perDir = 6
	var layouts []Layout
	for _, node := range []string{"node-1", "node-2"} {
		for range 2 {
			l := mustNodeLayout(t, t.TempDir(), node)
			l.Claims = claims
			layouts = append(layouts, l)
		}
	}
	type got struct {
		who  string
		base uint32
		err  error
	}
	results := make(chan got, len(layouts)*perDir)
	var wg sync.WaitGroup
	for i, l := range layouts {
		for j := range perDir {
			wg.Add(1)
			go func() {
				defer wg.Done()
				uid := types.UID(fmt.Sprintf("pod-%d", j))
				u, err := l.allocateUserNamespace(uid, defaultUsernsRanges)
				results <- got{fmt.Sprintf("state dir %d pod %s", i, uid), u.Base(), err}
			}()
		}
	}
	wg.Wait()
	close(results)
	owner := map[uint32]string{}
	for r := range results {
		if r.err != nil {
			t.Fatalf("%s: %v", r.who, r.err)
		}
		if o, dup := owner[r.base]; dup {
			t.Errorf("%s and %s both got host ids from %d", o, r.who, r.base)
		}
		owner[r.base] = r.who
	}
	if n := len(claimBases(t, claims)); n != len(layouts)*perDir {
		t.Errorf("%d claims, want %d", n, len(layouts)*perDir)
	}
}

// A claim whose pod's record is gone (its state directory was removed
// without a reset) is reclaimed; a live claim, or an unreadable one, is not.
func TestLayout_AllocateUserNamespace_StaleClaim(t *testing.T) {
	one := usernsRanges{first: 1, count: 1}
	l := mustNodeLayout(t, t.TempDir(), "node-1")
	gone := mustNodeLayout(t, t.TempDir(), "node-1")
	gone.Claims = l.Claims
	if _, err := gone.allocateUserNamespace("old", one); err != nil {
		t.Fatal(err)
	}
	if _, err := l.allocateUserNamespace("new", one); !errors.Is(err, ErrUserNamespacesExhausted) {
		t.Fatalf("with the range held by a live pod of another state directory: %v, want ErrUserNamespacesExhausted", err)
	}
	if err := os.RemoveAll(gone.State().Dir); err != nil {
		t.Fatal(err)
	}
	u, err := l.allocateUserNamespace("new", one)
	if err != nil || u.Base() != 65536 {
		t.Fatalf("after the other state directory went: %+v, %v; want the stale range 65536", u, err)
	}
	b, err := os.ReadFile(l.Claims.Claim(65536))
	if err != nil || !strings.Contains(string(b), `"podUID":"new"`) || !strings.Contains(string(b), l.State().Dir) {
		t.Errorf("the claim is %s (%v), want pod new of %s", b, err, l.State().Dir)
	}

	// An unreadable claim keeps its range.
	l2 := mustNodeLayout(t, t.TempDir(), "node-1")
	if err := os.MkdirAll(l2.Claims.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l2.Claims.Claim(65536), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.allocateUserNamespace("a", one); !errors.Is(err, ErrUserNamespacesExhausted) {
		t.Fatalf("with an unreadable claim: %v, want ErrUserNamespacesExhausted", err)
	}
}

// A pod recorded with a range that another live pod claims is refused,
// naming both; a recorded pod without a claim (a record older than claims)
// gets its claim.
func TestLayout_AllocateUserNamespace_RecordedRangeClaimed(t *testing.T) {
	a := mustNodeLayout(t, t.TempDir(), "node-1")
	b := mustNodeLayout(t, t.TempDir(), "node-1")
	b.Claims = a.Claims
	if _, err := a.allocateUserNamespace("a", defaultUsernsRanges); err != nil {
		t.Fatal(err)
	}
	m := IDMapping{HostID: 65536, Length: UserNamespaceLength}
	if err := writeRecord(b.UserNamespaceFile("b"), UserNamespace{UIDMappings: []IDMapping{m}, GIDMappings: []IDMapping{m}}); err != nil {
		t.Fatal(err)
	}
	_, err := b.allocateUserNamespace("b", defaultUsernsRanges)
	if !errors.Is(err, ErrUserNamespaceClaimed) || !strings.Contains(err.Error(), a.State().Dir) {
		t.Fatalf("error %v, want ErrUserNamespaceClaimed naming %s", err, a.State().Dir)
	}
	m.HostID = 131072
	if err := writeRecord(b.UserNamespaceFile("b"), UserNamespace{UIDMappings: []IDMapping{m}, GIDMappings: []IDMapping{m}}); err != nil {
		t.Fatal(err)
	}
	if u, err := b.allocateUserNamespace("b", defaultUsernsRanges); err != nil || u.Base() != 131072 {
		t.Fatalf("a recorded, unclaimed range: %+v, %v; want 131072", u, err)
	}
	if got := claimBases(t, a.Claims); !slices.Equal(got, []uint32{65536, 131072}) {
		t.Errorf("claims %v, want [65536 131072]", got)
	}
}

// Freeing: the pod's claim goes once its record does; a reset's release
// frees every claim of its state directory whose record is gone, and no
// other.
func TestLayout_ReleaseUserNamespace(t *testing.T) {
	l := mustNodeLayout(t, t.TempDir(), "node-1")
	other := mustNodeLayout(t, t.TempDir(), "node-1")
	other.Claims = l.Claims
	for _, uid := range []types.UID{"a", "b", "c"} {
		if _, err := l.allocateUserNamespace(uid, defaultUsernsRanges); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.allocateUserNamespace("x", defaultUsernsRanges); err != nil {
		t.Fatal(err)
	}
	// Released while its record is there: kept.
	if err := l.releaseUserNamespace("a"); err != nil {
		t.Fatal(err)
	}
	if got := claimBases(t, l.Claims); len(got) != 4 {
		t.Fatalf("claims %v after releasing a pod that still has its record, want 4", got)
	}
	if err := os.RemoveAll(l.PodDir("a")); err != nil {
		t.Fatal(err)
	}
	if err := l.releaseUserNamespace("a"); err != nil {
		t.Fatal(err)
	}
	if got := claimBases(t, l.Claims); !slices.Equal(got, []uint32{131072, 196608, 262144}) {
		t.Fatalf("claims %v after pod a went, want [131072 196608 262144]", got)
	}
	// A reset: the node directories go, then the claims.
	if err := os.RemoveAll(l.State().NodesDir()); err != nil {
		t.Fatal(err)
	}
	removed, err := ReleaseUserNamespaceClaims(l.Claims, l.State())
	if err != nil || len(removed) != 2 {
		t.Fatalf("released %v, %v; want the 2 claims of pods b and c", removed, err)
	}
	if got := claimBases(t, l.Claims); !slices.Equal(got, []uint32{262144}) {
		t.Errorf("claims %v after the reset, want only the other state directory's [262144]", got)
	}
}
