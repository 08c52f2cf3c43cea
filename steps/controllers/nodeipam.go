package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podlab/podlab/internal/klog"
	"github.com/podlab/podlab/steps/apiserver"
)

// The node IPAM controller's names in kube-controller-manager: its logger,
// and the component of its events.
const (
	nodeIPAMControllerName = "node-ipam-controller"
	cidrAllocatorComponent = "cidrAllocator"
)

// DefaultClusterCIDR is the lab's --cluster-cidr (flannel's and kubeadm
// guides' usual pod network); DefaultNodeCIDRMaskSize kube's default
// --node-cidr-mask-size for IPv4: a /24, 254 pod addresses, per node.
const (
	DefaultClusterCIDR      = "10.244.0.0/16"
	DefaultNodeCIDRMaskSize = 24
)

// NodeIPAM is the configuration of the node IPAM controller
// (kube-controller-manager --allocate-node-cidrs --cluster-cidr
// --node-cidr-mask-size, with the range allocator, kube's default).
type NodeIPAM struct {
	ClusterCIDR  netip.Prefix
	NodeMaskSize int
}

// ParseNodeIPAM checks the flags: clusterCIDR one IPv4 or IPv6 CIDR, the
// node mask at least as long as its own (and at most 16 bits longer for
// IPv6). podlab does not do dual stack (two CIDRs).
func ParseNodeIPAM(clusterCIDR string, nodeMaskSize int) (NodeIPAM, error) {
	p, err := netip.ParsePrefix(clusterCIDR)
	if err != nil {
		return NodeIPAM{}, fmt.Errorf("--cluster-cidr %q: want one CIDR, such as %s: %w", clusterCIDR, DefaultClusterCIDR, err)
	}
	if p.Masked() != p {
		return NodeIPAM{}, fmt.Errorf("--cluster-cidr %q has host bits set: did you mean %s?", clusterCIDR, p.Masked())
	}
	cfg := NodeIPAM{ClusterCIDR: p, NodeMaskSize: nodeMaskSize}
	if _, err := NewCIDRSet(p, nodeMaskSize); err != nil {
		return NodeIPAM{}, err
	}
	return cfg, nil
}

// WithNodeIPAM runs the node IPAM controller with cfg (from ParseNodeIPAM).
func WithNodeIPAM(cfg NodeIPAM) Option { return func(m *Manager) { m.ipam = &cfg } }

// nodeIPAMController is kube-controller-manager's node IPAM controller
// with its range allocator (pkg/controller/nodeipam/ipam): each Node
// without spec.podCIDRs gets the next free block of the cluster CIDR in
// spec.podCIDR and spec.podCIDRs, the range its pods' addresses come from
// (the CNI plugin's host-local IPAM reads it). The allocator keeps no
// state anywhere but in the Nodes: on start it marks the blocks of every
// existing node taken, so a restart hands out no block twice. A node that
// cannot get one (the cluster CIDR is full) gets the Normal event
// CIDRNotAvailable, and the error is logged and retried with backoff.
// Its log lines name the lines of k8s.io/kubernetes v1.37.2's
// range_allocator.go, as the other controllers' name v1.37.2's files.
type nodeIPAMController struct {
	r    *run
	log  klog.Logger
	q    *queue
	rec  *apiserver.Recorder
	cidr *CIDRSet
}

func newNodeIPAMController(r *run, cfg NodeIPAM) *nodeIPAMController {
	set, err := NewCIDRSet(cfg.ClusterCIDR, cfg.NodeMaskSize)
	if err != nil {
		// ParseNodeIPAM has checked it; a hand-made NodeIPAM that fails is
		// reported by the first sync.
		set = nil
	}
	return &nodeIPAMController{
		r: r, q: newQueue(r.singlePass), cidr: set,
		log: r.m.log.Logger(nodeIPAMControllerName),
		rec: apiserver.NewRecorder(r.m.client, cidrAllocatorComponent, ""),
	}
}

func (c *nodeIPAMController) queue() *queue { return c.q }

// nodeChanged is the node informer's add and update handler: a node with
// CIDRs has them marked taken at once (before any allocation), one
// without is queued.
func (c *nodeIPAMController) nodeChanged(node *corev1.Node) {
	if len(node.Spec.PodCIDRs) == 0 {
		c.q.Add(node.Name)
		return
	}
	c.log.V(4).Info(at("range_allocator.go", 122), "Node has CIDR, occupying it in CIDR map", "node", klog.KObj(node), "podCIDR", node.Spec.PodCIDR)
	if err := c.occupy(node); err != nil {
		// kube-controller-manager stops here (the allocator's constructor
		// fails); podlab logs it and goes on without that node.
		c.r.handleError(at("range_allocator.go", 123), err)
	}
}

// nodeDeleted releases the node's CIDRs.
func (c *nodeIPAMController) nodeDeleted(node *corev1.Node) {
	if c.cidr == nil {
		return
	}
	for _, s := range node.Spec.PodCIDRs {
		p, err := netip.ParsePrefix(s)
		if err == nil {
			c.log.V(4).Info(at("range_allocator.go", 361), "Release CIDR for node", "CIDR", s, "node", klog.KObj(node))
			err = c.cidr.Release(p)
		}
		if err != nil {
			c.log.Error(at("range_allocator.go", 163), fmt.Errorf("error when releasing CIDR %v: %w", s, err), "Error while processing CIDR Release")
		}
	}
}

// occupy marks node's CIDRs taken (kube's occupyCIDRs).
func (c *nodeIPAMController) occupy(node *corev1.Node) error {
	if c.cidr == nil {
		return nil
	}
	for idx, s := range node.Spec.PodCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("failed to parse node %s, CIDR %s", node.Name, node.Spec.PodCIDR)
		}
		if idx >= 1 {
			return fmt.Errorf("node:%s has an allocated cidr: %v at index:%v that does not exist in cluster cidrs configuration", node.Name, s, idx)
		}
		if err := c.cidr.Occupy(p); err != nil {
			return fmt.Errorf("failed to mark cidr[%v] at idx [%v] as occupied for node: %v: %w", p, idx, node.Name, err)
		}
	}
	return nil
}

func (c *nodeIPAMController) handleErr(_ context.Context, key string, err error) {
	c.r.failed("node ipam controller", key, err)
	if err == nil {
		c.q.Forget(key)
		return
	}
	c.log.Error(at("range_allocator.go", 257), fmt.Errorf("error syncing '%s': %s, requeuing", key, err.Error()), "Error processing node work item")
	c.q.AddRateLimited(key)
}

// sync is syncNode and AllocateOrOccupyCIDR: a node without CIDRs gets the
// next free block, written with a strategic merge patch of spec.podCIDR
// and spec.podCIDRs (kube's PatchNodeCIDRs).
func (c *nodeIPAMController) sync(ctx context.Context, key string) error {
	if c.cidr == nil {
		return fmt.Errorf("node IPAM: bad configuration: use controllers.ParseNodeIPAM")
	}
	o, ok := c.r.informers["nodes"].Get("", key)
	if !ok {
		c.log.V(3).Info(at("range_allocator.go", 273), "node has been deleted", "node", key)
		return nil
	}
	node := o.(*corev1.Node)
	if node.DeletionTimestamp != nil {
		c.log.V(3).Info(at("range_allocator.go", 283), "node is being deleted", "node", key)
		return nil
	}
	if len(node.Spec.PodCIDRs) > 0 {
		return c.occupy(node)
	}
	cidr, err := c.cidr.AllocateNext()
	if err != nil {
		c.log.V(2).Info(at("controller_utils.go", 186), "Recording status change event message for node", "status", "CIDRNotAvailable", "node", node.Name)
		c.r.event(ctx, c.rec, c.log, node, corev1.EventTypeNormal, "CIDRNotAvailable", fmt.Sprintf("Node %s status is now: %s", node.Name, "CIDRNotAvailable"))
		return fmt.Errorf("failed to allocate cidr from cluster cidr at idx:%v: %w", 0, err)
	}
	c.log.V(4).Info(at("range_allocator.go", 338), "Putting node with CIDR into the work queue", "node", klog.KObj(node), "CIDRs", []string{cidr.String()})
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": cidr.String(), "podCIDRs": []string{cidr.String()}}})
	if err != nil {
		return err
	}
	if _, err := c.r.client.Patch(ctx, "nodes", "", node.Name, types.StrategicMergePatchType, patch, apiserver.PatchOptions{}); err != nil {
		c.log.Error(at("range_allocator.go", 438), err, "Failed to update node PodCIDR after multiple attempts", "node", klog.KObj(node), "podCIDRs", []string{cidr.String()})
		c.r.event(ctx, c.rec, c.log, node, corev1.EventTypeNormal, "CIDRAssignmentFailed", fmt.Sprintf("Node %s status is now: %s", node.Name, "CIDRAssignmentFailed"))
		if rerr := c.cidr.Release(cidr); rerr != nil {
			c.log.Error(at("range_allocator.go", 447), rerr, "Error releasing allocated CIDR for node", "node", klog.KObj(node))
		}
		return fmt.Errorf("setting spec.podCIDR of node %s to %s: %w", node.Name, cidr, err)
	}
	c.log.Info(at("range_allocator.go", 433), "Set node PodCIDR", "node", klog.KObj(node), "podCIDRs", []string{cidr.String()})
	c.r.record(func(rep *Report) { rep.NodeCIDRs = append(rep.NodeCIDRs, node.Name+" "+cidr.String()) })
	return nil
}
