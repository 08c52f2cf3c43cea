package controllers

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podlab/podlab/steps/apiserver"
)

func TestCIDRSet(t *testing.T) {
	tests := []struct {
		name     string
		cluster  string
		mask     int
		occupied []string
		want     []string // successive AllocateNext; "full" for ErrCIDRRangeNoCIDRsRemaining
	}{
		{"the lab's /16 in /24s", "10.244.0.0/16", 24, nil, []string{"10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"}},
		{"occupied blocks are skipped", "10.244.0.0/16", 24, []string{"10.244.0.0/24", "10.244.2.0/24"}, []string{"10.244.1.0/24", "10.244.3.0/24"}},
		{"a /23 has two /24s", "10.244.0.0/23", 24, nil, []string{"10.244.0.0/24", "10.244.1.0/24", "full"}},
		{"node mask = cluster mask: one block", "192.168.7.0/24", 24, nil, []string{"192.168.7.0/24", "full"}},
		{"blocks across an octet", "10.0.0.0/8", 20, []string{"10.0.0.0/20"}, []string{"10.0.16.0/20"}},
		{"IPv6 /48 in /64s", "fd00:10::/48", 64, nil, []string{"fd00:10::/64", "fd00:10:0:1::/64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewCIDRSet(netip.MustParsePrefix(tt.cluster), tt.mask)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range tt.occupied {
				if err := s.Occupy(netip.MustParsePrefix(o)); err != nil {
					t.Fatalf("Occupy(%s): %v", o, err)
				}
			}
			for i, want := range tt.want {
				got, err := s.AllocateNext()
				if want == "full" {
					if !errors.Is(err, ErrCIDRRangeNoCIDRsRemaining) {
						t.Fatalf("allocation %d: %v, %v; want ErrCIDRRangeNoCIDRsRemaining", i, got, err)
					}
					continue
				}
				if err != nil || got.String() != want {
					t.Fatalf("allocation %d: %v, %v; want %s", i, got, err, want)
				}
			}
		})
	}
}

// A released block is free again, after the others (round robin).
func TestCIDRSet_Release(t *testing.T) {
	s, err := NewCIDRSet(netip.MustParsePrefix("10.244.0.0/23"), 24)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.AllocateNext()
	if _, err := s.AllocateNext(); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(a); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AllocateNext(); err != nil || got != a {
		t.Fatalf("after Release(%s): %v, %v", a, got, err)
	}
}

func TestCIDRSet_BadInput(t *testing.T) {
	s, err := NewCIDRSet(netip.MustParsePrefix("10.244.0.0/16"), 24)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"10.245.0.0/24", "10.244.1.0/25", "10.244.1.0/23", "fd00::/24"} {
		if err := s.Occupy(netip.MustParsePrefix(bad)); err == nil || !strings.Contains(err.Error(), "is not a /24 of the cluster CIDR 10.244.0.0/16") {
			t.Errorf("Occupy(%s) = %v", bad, err)
		}
	}
}

func TestParseNodeIPAM(t *testing.T) {
	if cfg, err := ParseNodeIPAM(DefaultClusterCIDR, DefaultNodeCIDRMaskSize); err != nil || cfg.ClusterCIDR.String() != "10.244.0.0/16" || cfg.NodeMaskSize != 24 {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	tests := []struct {
		name, cidr string
		mask       int
		is         error
		says       string
	}{
		{"no mask", "10.244.0.0", 24, nil, `--cluster-cidr "10.244.0.0": want one CIDR, such as 10.244.0.0/16`},
		{"not a CIDR", "pods", 24, nil, `--cluster-cidr "pods": want one CIDR`},
		{"two CIDRs (dual stack)", "10.244.0.0/16,fd00::/48", 24, nil, "want one CIDR"},
		{"host bits", "10.244.3.0/16", 24, nil, "has host bits set: did you mean 10.244.0.0/16?"},
		{"node mask shorter than the cluster's", "10.244.0.0/16", 8, ErrBadNodeCIDRMaskSize, "--node-cidr-mask-size 8 with --cluster-cidr 10.244.0.0/16"},
		{"node mask past the address", "10.244.0.0/16", 33, ErrBadNodeCIDRMaskSize, ""},
		{"IPv6 node mask 17 bits longer", "fd00::/48", 65, ErrCIDRSetSubNetTooBig, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseNodeIPAM(tt.cidr, tt.mask)
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("ParseNodeIPAM(%q, %d) = %v; want %v saying %q", tt.cidr, tt.mask, err, tt.is, tt.says)
			}
		})
	}
}

func ipamNode(name string, podCIDRs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(podCIDRs) > 0 {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDRs[0], podCIDRs
	}
	return n
}

func (l *lab) podCIDRs(name string) []string {
	l.t.Helper()
	o, err := l.admin.Get(l.ctx, "nodes", "", name)
	if err != nil {
		l.t.Fatal(err)
	}
	n := o.(*corev1.Node)
	if len(n.Spec.PodCIDRs) > 0 && n.Spec.PodCIDR != n.Spec.PodCIDRs[0] {
		l.t.Errorf("node %s: podCIDR %s, podCIDRs %v", name, n.Spec.PodCIDR, n.Spec.PodCIDRs)
	}
	return n.Spec.PodCIDRs
}

// Nodes without a podCIDR get the next free /24; a node that has one
// keeps it, and a restarted controller-manager (a new Once) reads the
// nodes and hands out no block twice.
func TestNodeIPAM_Once(t *testing.T) {
	l := newLab(t)
	cfg, err := ParseNodeIPAM(DefaultClusterCIDR, DefaultNodeCIDRMaskSize)
	if err != nil {
		t.Fatal(err)
	}
	l.create(ipamNode("node-a"))
	l.create(ipamNode("node-b", "10.244.0.0/24")) // given before a restart
	l.create(ipamNode("node-c"))
	rep, err := l.manager(l.cm, WithNodeIPAM(cfg)).Once(l.ctx)
	if err != nil {
		t.Fatalf("Once: %v\n%s", err, tail(l.log.String(), 30))
	}
	want := map[string]string{"node-a": "10.244.1.0/24", "node-b": "10.244.0.0/24", "node-c": "10.244.2.0/24"}
	for n, c := range want {
		if got := l.podCIDRs(n); len(got) != 1 || got[0] != c {
			t.Errorf("node %s: podCIDRs %v, want [%s]", n, got, c)
		}
	}
	if got := strings.Join(rep.NodeCIDRs, ", "); got != "node-a 10.244.1.0/24, node-c 10.244.2.0/24" {
		t.Errorf("Report.NodeCIDRs = %s", got)
	}
	if !strings.Contains(l.log.String(), `range_allocator.go:433] "Set node PodCIDR" logger="node-ipam-controller" node="node-a" podCIDRs=["10.244.1.0/24"]`) {
		t.Errorf("no Set node PodCIDR line:\n%s", tail(l.log.String(), 30))
	}

	// Restart: a new run knows nothing but what the nodes say.
	l.create(ipamNode("node-d"))
	if _, err := l.manager(l.cm, WithNodeIPAM(cfg)).Once(l.ctx); err != nil {
		t.Fatal(err)
	}
	if got := l.podCIDRs("node-d"); len(got) != 1 || got[0] != "10.244.3.0/24" {
		t.Errorf("node-d after a restart: %v, want [10.244.3.0/24]", got)
	}

	// Without --allocate-node-cidrs, nodes are left alone.
	l.create(ipamNode("node-e"))
	l.once()
	if got := l.podCIDRs("node-e"); len(got) != 0 {
		t.Errorf("node-e got %v without the node IPAM controller", got)
	}
}

// A full cluster CIDR: the node without a block gets kube's event and a
// logged error, and Once says why.
func TestNodeIPAM_Exhausted(t *testing.T) {
	l := newLab(t)
	cfg, err := ParseNodeIPAM("10.244.0.0/23", 24)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		l.create(ipamNode(n))
	}
	_, err = l.manager(l.cm, WithNodeIPAM(cfg)).Once(l.ctx)
	if !errors.Is(err, ErrCIDRRangeNoCIDRsRemaining) || !strings.Contains(err.Error(), "syncing node ipam controller node-3: failed to allocate cidr from cluster cidr at idx:0") {
		t.Fatalf("Once = %v, want ErrCIDRRangeNoCIDRsRemaining for node-3", err)
	}
	if got := l.podCIDRs("node-3"); len(got) != 0 {
		t.Errorf("node-3 got %v", got)
	}
	evs, err := l.admin.List(l.ctx, "events", "", apiserver.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range evs.Items {
		ev := o.(*corev1.Event)
		if ev.InvolvedObject.Kind == "Node" && ev.InvolvedObject.Name == "node-3" && ev.Reason == "CIDRNotAvailable" &&
			ev.Type == corev1.EventTypeNormal && ev.Message == "Node node-3 status is now: CIDRNotAvailable" && ev.Source.Component == "cidrAllocator" &&
			ev.InvolvedObject.APIVersion == "v1" && ev.InvolvedObject.UID != "" {
			found = true
		}
	}
	if !found {
		t.Errorf("no CIDRNotAvailable event about node-3 among %d events", len(evs.Items))
	}
	// kube's controllerutil.RecordNodeStatusChange logs before the event
	if !strings.Contains(l.log.String(), `controller_utils.go:186] "Recording status change event message for node" logger="node-ipam-controller" status="CIDRNotAvailable" node="node-3"`) {
		t.Errorf("no status change line:\n%s", tail(l.log.String(), 30))
	}
	if !strings.Contains(l.log.String(), `range_allocator.go:257] "Error processing node work item" err="error syncing 'node-3': failed to allocate cidr from cluster cidr at idx:0: CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range, requeuing" logger="node-ipam-controller"`) {
		t.Errorf("no error line:\n%s", tail(l.log.String(), 30))
	}
}
