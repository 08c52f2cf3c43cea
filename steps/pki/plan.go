package pki

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Groups and names of the lab's identities, as Kubernetes spells them.
const (
	GroupMasters = "system:masters"
	GroupNodes   = "system:nodes"
	// NodeUserPrefix starts a kubelet's user name: system:node:NODE is
	// what the Node authorizer and NodeRestriction recognise.
	NodeUserPrefix = "system:node:"
	// KubeletClientCommonName is the API server's user when it calls a
	// kubelet. kubeadm v1.37 gives it no group and binds the user to the
	// ClusterRole system:kubelet-api-admin (ClusterRoleBinding
	// kubeadm:apiserver-kubelet-client); older releases put it in
	// kubeadm:cluster-admins, and before v1.29 in system:masters.
	KubeletClientCommonName = "kube-apiserver-kubelet-client"
	// NetworkAgentUser is the network agent's user (podlab network-agent,
	// flannel's part), with no group: the API server's bootstrap policy
	// binds it to the ClusterRole network-agent (get, list, watch nodes),
	// as flannel's ServiceAccount is bound to the ClusterRole flannel.
	NetworkAgentUser = "network-agent"
)

// ServiceIP is the first address of the default Service CIDR
// (10.96.0.0/12): the ClusterIP of the kubernetes Service, by which pods
// reach the API server. kube-apiserver puts it in its serving certificate.
var ServiceIP = net.IPv4(10, 96, 0, 1)

// apiserverDNSNames are the names kube-apiserver always puts in its serving
// certificate: localhost, and the kubernetes Service's names.
var apiserverDNSNames = []string{
	"localhost",
	"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
}

// Credential is one certificate of the lab: its files' name, what it is
// for, and what to issue.
type Credential struct {
	// Name names its files: pki/<Name>.crt and pki/<Name>.key.
	Name string
	// Purpose says in a line what the certificate is for, in Kubernetes'
	// terms.
	Purpose string
	Spec    Spec
	// Kubeconfig, if not empty, names the kubeconfig that carries the
	// certificate: kubeconfigs/<Kubeconfig>.kubeconfig.
	Kubeconfig string
	// ServerHost, if not empty, is the host the kubeconfig names the API
	// server by, at the server's port: a joined node's kubelet reaches it
	// at the lab network's gateway.
	ServerHost string
}

// Node is a node of the lab: its name, and the addresses and names its
// kubelet's serving certificate must answer to (IPs or DNS names).
type Node struct {
	Name  string
	Hosts []string
	// ServerHost, if not empty, is where the node's kubeconfig says the
	// API server is, instead of the server's own host: the lab gateway,
	// for a node that joined as a machine of its own (podlab node join).
	ServerHost string
}

// reservedNames are the credentials' file names: a node may not take one.
var reservedNames = []string{"ca", "apiserver", "apiserver-kubelet-client", "admin", "kube-scheduler", "kube-controller-manager", "developer", "viewer", "network-agent"}

// CheckNodeName says what is wrong with a node name, if anything: it must be
// a DNS subdomain (as a Node's name), and must not share its files with
// another credential of the lab.
func CheckNodeName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%w %q: %s", ErrBadNodeName, name, strings.Join(errs, "; "))
	}
	if slices.Contains(reservedNames, name) || strings.HasPrefix(name, "kubelet-") {
		return fmt.Errorf("%w %q: its certificate and kubeconfig would share files with another identity's (%s, or kubelet-*): choose another name", ErrBadNodeName, name, strings.Join(reservedNames, ", "))
	}
	return nil
}

// Credentials are the certificates of the lab: the API server's serving
// and kubelet-client certificates, one client certificate per identity, and
// for each node a client and a serving certificate. apiserverHosts are
// added to the API server's SANs (its host's name and addresses).
func Credentials(apiserverHosts []string, nodes []Node) ([]Credential, error) {
	dns, ips := splitHosts(apiserverHosts)
	out := []Credential{
		{
			Name:    "apiserver",
			Purpose: "the API server's serving certificate: clients check it is the API server they dial",
			Spec: Spec{
				CommonName: "kube-apiserver",
				Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
				DNSNames:   union(apiserverDNSNames, dns),
				IPs:        unionIPs([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, ServiceIP}, ips),
			},
		},
		{
			Name:    "apiserver-kubelet-client",
			Purpose: "the API server's client certificate, for calling kubelets (logs, exec)",
			Spec:    Spec{CommonName: KubeletClientCommonName, Usages: clientAuth},
		},
		client("admin", "the cluster administrator, in system:masters", "admin", GroupMasters),
		client("kube-scheduler", "the scheduler's identity", "system:kube-scheduler"),
		client("kube-controller-manager", "the controller manager's identity", "system:kube-controller-manager"),
		client("developer", "a developer, who may edit the default namespace", "developer", "developers"),
		client("viewer", "a viewer, who may only read", "viewer", "viewers"),
		client("network-agent", "the network agent (flannel's part): reads every Node, to route to its pods", NetworkAgentUser),
	}
	for _, n := range nodes {
		cs, err := NodeCredentials(n)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// NodeCredentials are a node's two certificates: its kubelet's client
// certificate (system:node:NAME in system:nodes, with a kubeconfig NAME) and
// its serving certificate (kubelet-NAME), for its own HTTPS API.
func NodeCredentials(n Node) ([]Credential, error) {
	if err := CheckNodeName(n.Name); err != nil {
		return nil, err
	}
	user := NodeUserPrefix + n.Name
	dns, ips := splitHosts(n.Hosts)
	kubeletClient := client(n.Name, "the kubelet of "+n.Name+", as a client of the API server", user, GroupNodes)
	kubeletClient.ServerHost = n.ServerHost
	return []Credential{
		kubeletClient,
		{
			Name:    "kubelet-" + n.Name,
			Purpose: "the kubelet of " + n.Name + "'s serving certificate, for its API (logs, exec)",
			Spec: Spec{
				CommonName:   user,
				Organization: []string{GroupNodes},
				Usages:       []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
				DNSNames:     union([]string{n.Name}, dns),
				IPs:          unionIPs([]net.IP{net.IPv4(127, 0, 0, 1)}, ips),
			},
		},
	}, nil
}

var clientAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}

func client(name, purpose, user string, groups ...string) Credential {
	return Credential{
		Name:       name,
		Purpose:    purpose,
		Spec:       Spec{CommonName: user, Organization: groups, Usages: clientAuth},
		Kubeconfig: name,
	}
}

// MachineHosts are the names and addresses the machine is known by: its
// host name and the address its kubelets report as their InternalIP (the
// first IPv4 address of an interface that is up and not loopback).
func MachineHosts() []string {
	var out []string
	if h, err := os.Hostname(); err == nil && h != "" {
		out = append(out, h)
	}
	if ip := MachineIP(); ip != "" {
		out = append(out, ip)
	}
	return out
}

// MachineIP is the machine's first IPv4 address that is up and not
// loopback, or "": the address a kubelet reports for its Node, and so one
// its serving certificate names.
func MachineIP() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				return n.IP.String()
			}
		}
	}
	return ""
}

func splitHosts(hosts []string) (dns []string, ips []net.IP) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if h != "" {
			dns = append(dns, strings.ToLower(h))
		}
	}
	return dns, ips
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func unionIPs(a, b []net.IP) []net.IP {
	out := slices.Clone(a)
	for _, ip := range b {
		if !slices.ContainsFunc(out, ip.Equal) {
			out = append(out, ip)
		}
	}
	return out
}
