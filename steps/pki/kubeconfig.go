package pki

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ClusterName is the cluster every kubeconfig names.
const ClusterName = "podlab"

// ContextName is the context of user in the lab's cluster, as kubeadm names
// its contexts: kubernetes-admin@kubernetes.
func ContextName(user string) string { return user + "@" + ClusterName }

// Kubeconfig is the kubeconfig of the user whose certificate is kp: one
// cluster (the API server at server, trusted through ca), one user (the
// certificate and key embedded, as kubeadm's admin.conf) and one context,
// the current one.
func Kubeconfig(server string, ca, kp *KeyPair) (*clientcmdapi.Config, error) {
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return nil, err
	}
	user := kp.Cert.Subject.CommonName
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[ClusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca.CertPEM()}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM(), ClientKeyData: keyPEM}
	cfg.Contexts[ContextName(user)] = &clientcmdapi.Context{Cluster: ClusterName, AuthInfo: user}
	cfg.CurrentContext = ContextName(user)
	return cfg, nil
}

// writeKubeconfig writes the kubeconfig called name unless the file already
// says the same, with clientcmd, mode 0600 (it holds a private key).
func writeKubeconfig(path, name, server string, ca, kp *KeyPair) (Item, error) {
	item := Item{
		Name:    name,
		Purpose: "kubectl --kubeconfig " + path + " acts as " + kp.Cert.Subject.CommonName,
		Subject: kp.Cert.Subject.CommonName,
		Files:   []string{path},
	}
	cfg, err := Kubeconfig(server, ca, kp)
	if err != nil {
		return item, err
	}
	want, err := clientcmd.Write(*cfg)
	if err != nil {
		return item, fmt.Errorf("encoding the kubeconfig %s: %w", path, err)
	}
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, want):
		item.Action = Kept
	case err == nil:
		item.Action, item.Reason = Updated, "its certificate or server changed"
	case errors.Is(err, fs.ErrNotExist):
		item.Action = Made
	default:
		item.Action, item.Reason = Updated, err.Error()
	}
	if item.Action != Kept {
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			return item, fmt.Errorf("writing the kubeconfig %s: %w", path, err)
		}
	}
	// WriteToFile keeps the mode of a file that exists.
	if err := os.Chmod(path, 0o600); err != nil {
		return item, fmt.Errorf("making the kubeconfig %s private (mode 0600): %w", path, err)
	}
	return item, nil
}

// serverURL is o.Server, or the server admin.kubeconfig names, or
// ServerURL(DefaultPort).
func serverURL(o Options) string {
	if o.Server != "" {
		return o.Server
	}
	// No admin.kubeconfig yet, or a damaged one (rewritten below): the default.
	cfg, err := clientcmd.LoadFromFile(o.Layout.Kubeconfig("admin"))
	if err != nil {
		return ServerURL(DefaultPort)
	}
	if c, ok := cfg.Clusters[ClusterName]; ok && c.Server != "" {
		return c.Server
	}
	return ServerURL(DefaultPort)
}
