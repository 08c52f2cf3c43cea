package controllers

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
)

// Errors of NewCIDRSet and of a CIDRSet (the text of kube's cidrset).
var (
	// ErrCIDRRangeNoCIDRsRemaining: every node CIDR of the cluster CIDR is
	// taken. Give the cluster a larger --cluster-cidr, or the nodes a
	// larger --node-cidr-mask-size (smaller ranges), or delete nodes.
	ErrCIDRRangeNoCIDRsRemaining = errors.New("CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range")
	// ErrCIDRSetSubNetTooBig: the node mask is more than 16 bits longer
	// than the cluster's, for IPv6 (kube's limit), or more than 24 for
	// IPv4 (podlab's, to keep the bitmap small; kube has none).
	ErrCIDRSetSubNetTooBig = errors.New("New CIDR set failed; the node CIDR size is too big")
	// ErrBadNodeCIDRMaskSize: the node mask is shorter than the
	// cluster's, or longer than the address.
	ErrBadNodeCIDRMaskSize = errors.New("Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family")
)

// clusterSubnetMaxDiff is how many bits longer than the cluster's a node
// mask may be: at most 65536 node CIDRs.
const clusterSubnetMaxDiff = 16

// CIDRSet hands out the node CIDRs of one cluster CIDR, as
// kube-controller-manager's cidrset: the cluster CIDR cut into blocks of
// the node mask size, numbered in address order, and a bitmap of the
// blocks in use. AllocateNext takes the first free block from the one
// after the last it gave (round robin, so that a block just released is
// not handed out again at once). It is not safe for concurrent use.
type CIDRSet struct {
	cluster   netip.Prefix
	nodeBits  int
	max       int
	used      big.Int
	allocated int
	next      int
}

// NewCIDRSet cuts cluster into blocks of nodeMaskSize bits.
func NewCIDRSet(cluster netip.Prefix, nodeMaskSize int) (*CIDRSet, error) {
	cluster = cluster.Masked()
	bits := cluster.Addr().BitLen()
	if nodeMaskSize < cluster.Bits() || nodeMaskSize > bits {
		return nil, fmt.Errorf("--node-cidr-mask-size %d with --cluster-cidr %s: %w", nodeMaskSize, cluster, ErrBadNodeCIDRMaskSize)
	}
	diff := nodeMaskSize - cluster.Bits()
	if diff > clusterSubnetMaxDiff && (cluster.Addr().Is6() || diff > 24) {
		return nil, fmt.Errorf("--node-cidr-mask-size %d with --cluster-cidr %s: %w", nodeMaskSize, cluster, ErrCIDRSetSubNetTooBig)
	}
	return &CIDRSet{cluster: cluster, nodeBits: nodeMaskSize, max: 1 << diff}, nil
}

// block is the index-th node CIDR.
func (s *CIDRSet) block(index int) netip.Prefix {
	a := s.cluster.Addr().As16()
	// The index fills the address bits from the cluster mask's end to the
	// node mask's end.
	shift := s.cluster.Addr().BitLen() - s.nodeBits
	off := 16 - s.cluster.Addr().BitLen()/8 // IPv4 sits in the last 4 bytes
	v := new(big.Int).Lsh(big.NewInt(int64(index)), uint(shift))
	b := v.FillBytes(make([]byte, 16-off))
	for i := range b {
		a[off+i] |= b[i]
	}
	addr := netip.AddrFrom16(a)
	if s.cluster.Addr().Is4() {
		addr = addr.Unmap()
	}
	return netip.PrefixFrom(addr, s.nodeBits)
}

// index is the number of the node CIDR p, which must be one of the set's
// blocks.
func (s *CIDRSet) index(p netip.Prefix) (int, error) {
	if p.Bits() != s.nodeBits || p.Masked() != p || !s.cluster.Contains(p.Addr()) || p.Addr().Is4() != s.cluster.Addr().Is4() {
		return 0, fmt.Errorf("CIDR %s is not a /%d of the cluster CIDR %s", p, s.nodeBits, s.cluster)
	}
	a, c := p.Addr().AsSlice(), s.cluster.Addr().AsSlice()
	v := new(big.Int).Sub(new(big.Int).SetBytes(a), new(big.Int).SetBytes(c))
	v.Rsh(v, uint(p.Addr().BitLen()-s.nodeBits))
	return int(v.Int64()), nil
}

// AllocateNext takes the next free node CIDR.
func (s *CIDRSet) AllocateNext() (netip.Prefix, error) {
	if s.allocated == s.max {
		return netip.Prefix{}, ErrCIDRRangeNoCIDRsRemaining
	}
	c := s.next
	for s.used.Bit(c) != 0 {
		c = (c + 1) % s.max
	}
	s.next = (c + 1) % s.max
	s.used.SetBit(&s.used, c, 1)
	s.allocated++
	return s.block(c), nil
}

// Occupy marks p as taken (a node that has it already).
func (s *CIDRSet) Occupy(p netip.Prefix) error {
	i, err := s.index(p)
	if err != nil {
		return err
	}
	if s.used.Bit(i) == 0 {
		s.used.SetBit(&s.used, i, 1)
		s.allocated++
	}
	return nil
}

// Release frees p (its node is gone).
func (s *CIDRSet) Release(p netip.Prefix) error {
	i, err := s.index(p)
	if err != nil {
		return err
	}
	if s.used.Bit(i) != 0 {
		s.used.SetBit(&s.used, i, 0)
		s.allocated--
	}
	return nil
}
