package netagent

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RouteProtocol marks the routes the agent makes (a route's rtm_protocol,
// `ip route show proto 117`): no entry of iproute2's rt_protos uses 117,
// so a route with it is the agent's, and every other route is left alone.
const RouteProtocol netlink.RouteProtocol = 117

// Change is one change Apply made to the routing table: Op "add",
// "replace" (Was is the gateway it had) or "delete".
type Change struct {
	Op    string
	Route Route
	Was   net.IP
}

func (c Change) String() string {
	switch c.Op {
	case "replace":
		return fmt.Sprintf("route replace %s via %s (was via %s; node %s)", c.Route.Dst, c.Route.Via, c.Was, c.Route.Node)
	case "delete":
		return fmt.Sprintf("route delete %s via %s", c.Route.Dst, c.Route.Via)
	}
	return fmt.Sprintf("route %s %s via %s (node %s)", c.Op, c.Route.Dst, c.Route.Via, c.Route.Node)
}

// Router programs the routing table of one network namespace through a
// netlink socket opened in it.
type Router struct {
	h    *netlink.Handle
	path string
}

// OpenRouter opens a netlink socket in the network namespace bind-mounted
// at path ("" for the namespace of the calling thread). The calling thread
// never enters the namespace.
func OpenRouter(path string) (*Router, error) {
	if path == "" {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("opening a netlink socket: %w", err)
		}
		return &Router{h: h}, nil
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("opening the network namespace %s: %w (is the node joined? podlab node join NAME; or give --netns)", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("opening a netlink socket in the network namespace %s: %w", path, err)
	}
	return &Router{h: h, path: path}, nil
}

// CheckNetns says whether a netlink socket opens in the network namespace
// at path: what New would fail on, checked before anything else is set up.
func CheckNetns(path string) error {
	r, err := OpenRouter(path)
	if err != nil {
		return err
	}
	r.Close()
	return nil
}

// Close closes the netlink socket.
func (r *Router) Close() { r.h.Close() }

// Namespace is the namespace's path, "" for the caller's own.
func (r *Router) Namespace() string { return r.path }

// Routes are the agent's routes (RouteProtocol) in the main table.
func (r *Router) Routes() ([]netlink.Route, error) {
	rs, err := r.h.RouteListFiltered(netlink.FAMILY_ALL,
		&netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("listing the routes with protocol %d: %w", RouteProtocol, err)
	}
	return rs, nil
}

// Apply makes the agent's routes exactly desired: it adds the missing,
// replaces those whose gateway changed and deletes those of no desired
// destination. A destination held by a route the agent did not make is
// skipped (ErrNotOurs). It goes on after a failed route and returns every
// error, joined, with what it did.
func (r *Router) Apply(desired []Route) (changes []Change, skipped []Skip, err error) {
	ours, err := r.Routes()
	if err != nil {
		return nil, nil, err
	}
	have := map[string]netlink.Route{}
	for _, o := range ours {
		if o.Dst != nil {
			have[o.Dst.String()] = o
		}
	}
	var errs []error
	for _, d := range desired {
		key := d.Dst.String()
		o, ok := have[key]
		delete(have, key)
		if ok && o.Gw.Equal(d.Via) {
			continue
		}
		if !ok {
			foreign, err := r.h.RouteListFiltered(netlink.FAMILY_ALL,
				&netlink.Route{Dst: d.Dst, Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
			if err != nil {
				errs = append(errs, fmt.Errorf("listing the routes to %s: %w", d.Dst, err))
				continue
			}
			if len(foreign) > 0 {
				skipped = append(skipped, Skip{Node: d.Node, Reason: fmt.Errorf("%w: %s (protocol %s): leaving it", ErrNotOurs, d.Dst, foreign[0].Protocol)})
				continue
			}
		}
		nr := &netlink.Route{Dst: d.Dst, Gw: d.Via, Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN}
		if err := r.h.RouteReplace(nr); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %s (node %s): %w%s", d.Dst, d.Via, d.Node, err, gatewayHint(err)))
			continue
		}
		if ok {
			changes = append(changes, Change{Op: "replace", Route: d, Was: o.Gw})
		} else {
			changes = append(changes, Change{Op: "add", Route: d})
		}
	}
	for _, o := range have {
		if err := r.h.RouteDel(&o); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("deleting the route %s via %s: %w", o.Dst, o.Gw, err))
			continue
		}
		changes = append(changes, Change{Op: "delete", Route: Route{Dst: o.Dst, Via: o.Gw}})
	}
	return changes, skipped, errors.Join(errs...)
}

// gatewayHint explains the error of a gateway that is not on a network
// the namespace has a link to.
func gatewayHint(err error) string {
	if errors.Is(err, unix.ENETUNREACH) {
		return " (host-gw needs every node on one layer-2 network: the gateway must be an address of a link of this namespace, as the lab bridge's addresses are)"
	}
	return ""
}
