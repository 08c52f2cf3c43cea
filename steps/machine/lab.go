package machine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podlab/podlab/steps/statedir"
)

// EnvCIDR is the environment variable that chooses the lab network, as
// the --lab-cidr flag of podlab init does.
const EnvCIDR = "PODLAB_LAB_CIDR"

// DefaultRange is the private range the default lab networks are taken
// from: one /24 per state directory, chosen by its hash.
var DefaultRange = netip.MustParsePrefix("172.16.0.0/12")

// Lab is a state directory's lab network: a Linux bridge in the host's
// network namespace with the gateway on it, and a private network every
// joined node's machine has an address on.
type Lab struct {
	// CIDR is the network, such as 172.20.5.0/24.
	CIDR netip.Prefix `json:"cidr"`
	// Gateway is the bridge's address (.1): the host, and the API server,
	// as the machines see them.
	Gateway netip.Addr `json:"gateway"`
	// Bridge is the bridge's name (BridgeName).
	Bridge string `json:"bridge"`
	// Comment tags the rules of FORWARD and INPUT that send the lab's
	// traffic to its own chains: it names the state directory.
	Comment string `json:"comment"`
}

// hash is the state directory's hash, as its cgroup root has it.
func hash(dir string, more ...string) []byte {
	h := sha256.New()
	h.Write([]byte(filepath.Clean(dir)))
	for _, m := range more {
		h.Write([]byte{0})
		h.Write([]byte(m))
	}
	return h.Sum(nil)
}

// BridgeName is the lab bridge of a state directory: plab + 8 hex digits
// of sha256(dir), as the cgroup root (link names are global to the host's
// network namespace and at most 15 bytes).
func BridgeName(l statedir.Layout) string { return "plab" + hex.EncodeToString(hash(l.Dir)[:4]) }

// VethName is the host's end of a node's veth pair: pv + 10 hex digits of
// sha256(dir, node).
func VethName(l statedir.Layout, node string) string {
	return "pv" + hex.EncodeToString(hash(l.Dir, node)[:5])
}

// CheckCIDR says what is wrong with cidr as a lab network: it must be an
// IPv4 network address in a private range (RFC 1918), /16 to /28.
func CheckCIDR(cidr string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return p, fmt.Errorf("%w: %q: %v (want a network such as 172.20.5.0/24)", ErrBadCIDR, cidr, err)
	}
	switch {
	case !p.Addr().Is4():
		return p, fmt.Errorf("%w: %s is not IPv4 (want a network such as 172.20.5.0/24)", ErrBadCIDR, cidr)
	case p.Bits() < 16 || p.Bits() > 28:
		return p, fmt.Errorf("%w: %s: want a prefix of /16 to /28, such as /24", ErrBadCIDR, cidr)
	case p != p.Masked():
		return p, fmt.Errorf("%w: %s has host bits set: the network is %s", ErrBadCIDR, cidr, p.Masked())
	case !p.Addr().IsPrivate():
		return p, fmt.Errorf("%w: %s is not in a private range (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16): the lab routes nothing outside", ErrBadCIDR, cidr)
	}
	return p, nil
}

// LoadLab reads the lab network recorded for l (ErrNoLab if none).
func LoadLab(l statedir.Layout) (Lab, error) {
	b, err := os.ReadFile(l.LabRecord())
	if errors.Is(err, fs.ErrNotExist) {
		return Lab{}, fmt.Errorf("%w in %s: run `podlab init` (it chooses the lab network and puts its gateway in the API server's certificate), then restart podlab apiserver", ErrNoLab, l.Dir)
	}
	if err != nil {
		return Lab{}, fmt.Errorf("reading the lab network's record: %w", err)
	}
	var lab Lab
	if err := json.Unmarshal(b, &lab); err != nil || !lab.CIDR.IsValid() || !lab.Gateway.IsValid() || lab.Bridge == "" {
		return Lab{}, fmt.Errorf("reading the lab network's record %s: it is damaged (%v): remove it and run `podlab init` again", l.LabRecord(), err)
	}
	return lab, nil
}

// EnsureLab returns the lab network recorded for l, or chooses one and
// records it (made is then true). cidr, if not empty, is the network
// wanted: it must be the one recorded, or else a free private network
// (CheckCIDR) that overlaps no route or address of the host. Without it,
// the network is a /24 of DefaultRange chosen by the state directory's
// hash, the next free one if another network of the host has it.
func EnsureLab(l statedir.Layout, cidr string) (lab Lab, made bool, err error) {
	lab, err = LoadLab(l)
	switch {
	case err == nil && cidr != "":
		want, err := CheckCIDR(cidr)
		if err != nil {
			return lab, false, err
		}
		if want != lab.CIDR {
			return lab, false, fmt.Errorf("%w: %s was chosen (%s), not %s: `podlab reset` starts over with another", ErrLabMismatch, lab.CIDR, l.LabRecord(), want)
		}
		return lab, false, nil
	case err == nil:
		return lab, false, nil
	case !errors.Is(err, ErrNoLab):
		return lab, false, err
	}
	bridge := BridgeName(l)
	taken, err := hostNetworks(bridge)
	if err != nil {
		return lab, false, err
	}
	var p netip.Prefix
	if cidr != "" {
		if p, err = CheckCIDR(cidr); err != nil {
			return lab, false, err
		}
		if o, ok := overlaps(p, taken); ok {
			return lab, false, fmt.Errorf("%w: %s overlaps %s: choose another with --lab-cidr or %s", ErrOverlap, p, o, EnvCIDR)
		}
	} else if p, err = derive(l, taken); err != nil {
		return lab, false, err
	}
	lab = Lab{
		CIDR:    p,
		Gateway: p.Addr().Next(),
		Bridge:  bridge,
		Comment: comment(l),
	}
	b, err := json.MarshalIndent(lab, "", "  ")
	if err != nil {
		return lab, false, err
	}
	if err := os.MkdirAll(l.LabDir(), 0o755); err != nil {
		return lab, false, fmt.Errorf("recording the lab network: %w", err)
	}
	if err := os.WriteFile(l.LabRecord(), append(b, '\n'), 0o644); err != nil {
		return lab, false, fmt.Errorf("recording the lab network: %w", err)
	}
	return lab, true, nil
}

// comment is the comment of the lab's rules (iptables takes 256 bytes).
func comment(l statedir.Layout) string {
	c := "podlab lab network of " + l.Dir
	if len(c) > 255 {
		c = c[:255]
	}
	return c
}

// derive is the first /24 of DefaultRange, from the one the state
// directory's hash names, that overlaps none of taken.
func derive(l statedir.Layout, taken []netip.Prefix) (netip.Prefix, error) {
	const n = 1 << (24 - 12) // the /24s of a /12
	start := binary.BigEndian.Uint32(hash(l.Dir)[:4]) % n
	base := binary.BigEndian.Uint32(DefaultRange.Addr().AsSlice())
	for i := range uint32(n) {
		a := base + ((start+i)%n)<<8
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], a)
		p := netip.PrefixFrom(netip.AddrFrom4(b), 24)
		if _, ok := overlaps(p, taken); !ok {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("%w: every /24 of %s is taken on this host: choose a network with --lab-cidr or %s", ErrOverlap, DefaultRange, EnvCIDR)
}

func overlaps(p netip.Prefix, taken []netip.Prefix) (netip.Prefix, bool) {
	for _, t := range taken {
		if p.Overlaps(t) {
			return t, true
		}
	}
	return netip.Prefix{}, false
}

// hostNetworks are the networks of the host's routes (the default route
// aside) and addresses, but those of the link called own (the lab's
// bridge, when it exists).
func hostNetworks(own string) ([]netip.Prefix, error) {
	ownIndex := -1
	if l, err := netlink.LinkByName(own); err == nil {
		ownIndex = l.Attrs().Index
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("listing the host's routes: %w", err)
	}
	var out []netip.Prefix
	for _, r := range routes {
		if r.Dst == nil || r.LinkIndex == ownIndex {
			continue
		}
		if p, ok := prefixOf(r.Dst); ok && p.Bits() > 0 {
			out = append(out, p)
		}
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("listing the host's addresses: %w", err)
	}
	for _, a := range addrs {
		if a.LinkIndex == ownIndex || a.IPNet == nil {
			continue
		}
		if p, ok := prefixOf(a.IPNet); ok && !p.Addr().IsLoopback() {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones).Masked(), true
}

// CheckNodeName says what is wrong with name as a machine's name: it is
// the machine's host name, so a DNS label (RFC 1123: at most 63 lower-case
// letters, digits and '-', starting and ending with a letter or digit).
func CheckNodeName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("%w %q: a machine's name is its host name, a DNS label: %s", ErrBadNodeName, name, strings.Join(errs, "; "))
	}
	return nil
}
