package machine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
)

// Made says what Up made (false: it was there).
type Made struct {
	Bridge bool
	// Rule: the jumps from the host's FORWARD and INPUT chains to the
	// lab's own chains were not there (Rules).
	Rule bool
}

// Up makes the lab network on the host, or completes it: the bridge with
// the gateway's address, up, and the lab's rules (Rules): its own chains,
// written anew, and the jumps to them. A bridge it has to make must overlap
// no network of the host.
func Up(ctx context.Context, lab Lab) (Made, error) {
	var made Made
	br, err := netlink.LinkByName(lab.Bridge)
	if err != nil {
		if !errors.As(err, &netlink.LinkNotFoundError{}) {
			return made, fmt.Errorf("looking for the lab bridge %s: %w", lab.Bridge, err)
		}
		taken, err := hostNetworks(lab.Bridge)
		if err != nil {
			return made, err
		}
		if o, ok := overlaps(lab.CIDR, taken); ok {
			return made, fmt.Errorf("making the lab bridge %s: %w: %s overlaps %s, which the host has now: `podlab reset`, then podlab init --lab-cidr with a free network", lab.Bridge, ErrOverlap, lab.CIDR, o)
		}
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: lab.Bridge}}); err != nil {
			return made, fmt.Errorf("making the lab bridge %s: %w", lab.Bridge, err)
		}
		made.Bridge = true
		if br, err = netlink.LinkByName(lab.Bridge); err != nil {
			return made, fmt.Errorf("making the lab bridge %s: %w", lab.Bridge, err)
		}
	}
	gw := &netlink.Addr{IPNet: &net.IPNet{IP: lab.Gateway.AsSlice(), Mask: net.CIDRMask(lab.CIDR.Bits(), 32)}}
	if err := netlink.AddrReplace(br, gw); err != nil {
		return made, fmt.Errorf("giving the lab bridge %s the gateway's address %s: %w", lab.Bridge, gw.IPNet, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return made, fmt.Errorf("setting the lab bridge %s up: %w", lab.Bridge, err)
	}
	if made.Rule, err = ruleUp(ctx, lab); err != nil {
		return made, fmt.Errorf("isolating the lab network %s: %w", lab.CIDR, err)
	}
	return made, nil
}

// Down removes the lab network from the host: the jumps to the lab's
// chains (every copy), the chains, and the bridge. What is not there is
// not an error.
func Down(ctx context.Context, lab Lab) error {
	var errs []error
	if err := ruleDown(ctx, lab); err != nil && !errors.Is(err, ErrNoIptables) {
		errs = append(errs, err)
	}
	br, err := netlink.LinkByName(lab.Bridge)
	if err == nil {
		if err := netlink.LinkDel(br); err != nil {
			errs = append(errs, fmt.Errorf("removing the lab bridge %s: %w", lab.Bridge, err))
		}
	} else if !errors.As(err, &netlink.LinkNotFoundError{}) {
		errs = append(errs, fmt.Errorf("looking for the lab bridge %s: %w", lab.Bridge, err))
	}
	return errors.Join(errs...)
}

// ForwardChain and InputChain are the lab's own chains in the host's
// filter table, named after its bridge (and so after its state directory).
func ForwardChain(lab Lab) string { return lab.Bridge + "-fwd" }

// InputChain: see ForwardChain.
func InputChain(lab Lab) string { return lab.Bridge + "-in" }

// chain is one of the lab's chains and its rules, each as iptables -A
// takes it after the chain's name.
type chain struct {
	name  string
	rules [][]string
}

// chains are the lab's two chains: between labs, the rules decide, not
// the routes (root in a machine can add a route to another lab's network).
//
// The forward chain sees every packet the host forwards (the host bridges
// with netfilter on, bridge-nf-call-iptables=1, so frames the bridge
// forwards between two machines come through FORWARD too): what the bridge
// forwards between its own ports is accepted, whatever the host's policy
// (pods' traffic between nodes is in it); what would be routed from the
// lab to any other network, or into it from one, is dropped.
//
// The input chain sees what reaches the host itself from the bridge:
// accepted from the lab network to the lab network (the gateway, where
// the API server and the lab registry listen), dropped otherwise, such as
// another lab's gateway, a local address of the host too.
func chains(lab Lab) []chain {
	br, cidr := lab.Bridge, lab.CIDR.String()
	return []chain{
		{ForwardChain(lab), [][]string{
			{"-i", br, "-o", br, "-j", "ACCEPT"},
			{"-i", br, "-j", "DROP"},
			{"-o", br, "-j", "DROP"},
		}},
		{InputChain(lab), [][]string{
			{"-s", cidr, "-d", cidr, "-j", "ACCEPT"},
			{"-j", "DROP"},
		}},
	}
}

// jumps are the rules of the host's FORWARD and INPUT chains that send
// packets to the lab's chains, first of each chain, each with the lab's
// comment (it names the state directory): [chain, rule...].
func jumps(lab Lab) [][]string {
	c := []string{"-m", "comment", "--comment", lab.Comment}
	return [][]string{
		append(append([]string{"FORWARD"}, c...), "-j", ForwardChain(lab)),
		append(append([]string{"INPUT", "-i", lab.Bridge}, c...), "-j", InputChain(lab)),
	}
}

// legacyRule is the one FORWARD rule of labs made before the lab had
// chains of its own: Down removes it too.
func legacyRule(lab Lab) []string {
	return []string{"FORWARD", "-i", lab.Bridge, "-o", lab.Bridge, "-m", "comment", "--comment", lab.Comment, "-j", "ACCEPT"}
}

// RuleSpec is the FORWARD rule (the jump to the lab's forward chain), as
// iptables -S prints it without -A.
func RuleSpec(lab Lab) string { return shellJoin(jumps(lab)[0]) }

// Rules are the lab's rules as `iptables -S` prints them: its chains with
// what they hold, and the jumps to them.
func Rules(lab Lab) []string {
	var out []string
	for _, ch := range chains(lab) {
		out = append(out, "-N "+ch.name)
		for _, r := range ch.rules {
			out = append(out, "-A "+ch.name+" "+shellJoin(r))
		}
	}
	for _, j := range jumps(lab) {
		out = append(out, "-A "+shellJoin(j))
	}
	return out
}

// shellJoin joins args as iptables -S prints them: an argument with a
// space in double quotes.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if strings.ContainsAny(a, " \t\"") {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}

// ruleUp writes the lab's chains anew, in one iptables-restore (a chain
// it declares is flushed and filled in one commit: never a moment with
// half its rules), with the jumps that are missing inserted first of
// FORWARD and INPUT. made: a jump was missing.
func ruleUp(ctx context.Context, lab Lab) (made bool, err error) {
	var b strings.Builder
	b.WriteString("*filter\n")
	for _, ch := range chains(lab) {
		fmt.Fprintf(&b, ":%s - [0:0]\n", ch.name)
	}
	for _, ch := range chains(lab) {
		for _, r := range ch.rules {
			fmt.Fprintf(&b, "-A %s %s\n", ch.name, shellJoin(r))
		}
	}
	for _, j := range jumps(lab) {
		has, err := hasRule(ctx, j)
		if err != nil {
			return false, err
		}
		if !has {
			fmt.Fprintf(&b, "-I %s 1 %s\n", j[0], shellJoin(j[1:]))
			made = true
		}
	}
	b.WriteString("COMMIT\n")
	bin, err := exec.LookPath("iptables-restore")
	if err != nil {
		return false, ErrNoIptables
	}
	cmd := exec.CommandContext(ctx, bin, "-w", "10", "--noflush")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return false, fmt.Errorf("iptables-restore --noflush: %w: %s\n%s", err, strings.TrimSpace(string(out)), b.String())
	}
	return made, nil
}

// ruleDown removes the jumps to the lab's chains (every copy), the
// FORWARD rule of a lab made before it had chains, then the chains.
func ruleDown(ctx context.Context, lab Lab) error {
	var errs []error
	for _, r := range append(jumps(lab), legacyRule(lab)) {
		for range 10 {
			has, err := hasRule(ctx, r)
			if err != nil || !has {
				if err != nil {
					errs = append(errs, err)
				}
				break
			}
			if err := iptables(ctx, append([]string{"-D"}, r...)...); err != nil {
				errs = append(errs, fmt.Errorf("removing the lab's rule from %s: %w", r[0], err))
				break
			}
		}
	}
	for _, ch := range chains(lab) {
		exists, err := hasChain(ctx, ch.name)
		if err != nil || !exists {
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := iptables(ctx, "-F", ch.name); err != nil {
			errs = append(errs, fmt.Errorf("emptying the lab's chain %s: %w", ch.name, err))
			continue
		}
		if err := iptables(ctx, "-X", ch.name); err != nil {
			errs = append(errs, fmt.Errorf("removing the lab's chain %s: %w", ch.name, err))
		}
	}
	return errors.Join(errs...)
}

// hasChain says whether the filter table has the chain name (iptables -S
// of a chain that is not there exits 1).
func hasChain(ctx context.Context, name string) (bool, error) {
	err := iptables(ctx, "-S", name)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false, nil
	}
	return false, fmt.Errorf("looking for the lab's chain %s: %w", name, err)
}

// hasRule says whether rule ([chain, spec...]) is there. A rule that jumps
// to a chain that does not exist is not there.
func hasRule(ctx context.Context, rule []string) (bool, error) {
	if t := rule[len(rule)-1]; t != "ACCEPT" && t != "DROP" {
		if ok, err := hasChain(ctx, t); err != nil || !ok {
			return false, err
		}
	}
	err := iptables(ctx, append([]string{"-C"}, rule...)...)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false, nil
	}
	return false, fmt.Errorf("looking for the lab's rule in %s: %w", rule[0], err)
}

// iptables runs iptables -w (waiting for the xtables lock) with args. A
// check (-C, -S) that finds nothing returns the *exec.ExitError of exit
// status 1 as it is.
func iptables(ctx context.Context, args ...string) error {
	bin, err := exec.LookPath("iptables")
	if err != nil {
		return ErrNoIptables
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"-w", "10"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == 1 && (args[0] == "-C" || args[0] == "-S") {
			return err
		}
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
