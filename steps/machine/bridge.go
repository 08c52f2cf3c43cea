package machine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"
)

// Made says what Up made (false: it was there).
type Made struct {
	Bridge, Rule bool
}

// Up makes the lab network on the host, or completes it: the bridge with
// the gateway's address, up, and the FORWARD rule that accepts what the
// bridge forwards between its ports (the host bridges with netfilter on,
// bridge-nf-call-iptables=1, so its FORWARD policy applies to bridged
// traffic). A bridge it has to make must overlap no network of the host.
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
	has, err := hasRule(ctx, lab)
	if err != nil {
		return made, err
	}
	if !has {
		if err := iptables(ctx, append([]string{"-I"}, ruleSpec(lab)...)...); err != nil {
			return made, fmt.Errorf("accepting the lab bridge's forwarded traffic: %w", err)
		}
		made.Rule = true
	}
	return made, nil
}

// Down removes the lab network from the host: the FORWARD rule (every copy
// of it) and the bridge. What is not there is not an error.
func Down(ctx context.Context, lab Lab) error {
	var errs []error
	for range 10 {
		has, err := hasRule(ctx, lab)
		if err != nil || !has {
			if err != nil && !errors.Is(err, ErrNoIptables) {
				errs = append(errs, err)
			}
			break
		}
		if err := iptables(ctx, append([]string{"-D"}, ruleSpec(lab)...)...); err != nil {
			errs = append(errs, fmt.Errorf("removing the lab bridge's FORWARD rule: %w", err))
			break
		}
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

// RuleSpec is the FORWARD rule, as iptables -S prints it without -A.
func RuleSpec(lab Lab) string { return strings.Join(ruleSpec(lab), " ") }

func ruleSpec(lab Lab) []string {
	return []string{"FORWARD", "-i", lab.Bridge, "-o", lab.Bridge, "-m", "comment", "--comment", lab.Comment, "-j", "ACCEPT"}
}

func hasRule(ctx context.Context, lab Lab) (bool, error) {
	err := iptables(ctx, append([]string{"-C"}, ruleSpec(lab)...)...)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false, nil
	}
	return false, fmt.Errorf("looking for the lab bridge's FORWARD rule: %w", err)
}

// iptables runs iptables -w (waiting for the xtables lock) with args.
func iptables(ctx context.Context, args ...string) error {
	bin, err := exec.LookPath("iptables")
	if err != nil {
		return ErrNoIptables
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"-w", "10"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == 1 && args[0] == "-C" {
			return err
		}
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
