// Package pki is the lab's public-key infrastructure: what `podlab init`
// makes before any component talks to another, as Kubernetes the Hard Way's
// "Provisioning a CA and Generating TLS Certificates" and kubeadm's `init
// phase certs` and `init phase kubeconfig` do.
//
// # Why certificates
//
// Every connection in a cluster is TLS, and both ends prove who they are.
// The API server proves it is the API server with its serving certificate;
// a client (kubectl, the scheduler, a kubelet) proves who it is with a client
// certificate. Kubernetes keeps no user objects: a client certificate's
// subject is the identity. Its Common Name (CN) is the user name and each
// Organization (O) is a group, so "CN=admin, O=system:masters" is the user
// admin in the group system:masters. RBAC then decides what that user may do.
//
// One certificate authority (CA) signs them all, and every component trusts
// that CA and nothing else: a certificate the CA did not sign, one that has
// expired, or one not made for the use it is put to (a serving certificate
// presented as a client's) proves nothing.
//
// # The key algorithm
//
// Every key is RSA 2048, kubeadm's default encryptionAlgorithm (RSA-2048;
// it also offers RSA-3072, RSA-4096, ECDSA-P256 and ECDSA-P384), and every
// certificate is made as kubeadm's pkiutil makes it: key usages digital
// signature and key encipherment (and certificate signing for the CA), a
// random serial, valid from five minutes before it is made
// (CertificateBackdate) for one year (the CA ten), the CA's name also its
// DNS SAN. An RSA 2048 key takes tens of milliseconds to make on two cores,
// where an ECDSA P-256 key would take well under one: `podlab init` spends
// about a second on its keys.
//
// # The files
//
//	<state>/pki/                                 mode 0700, as kubeadm's /etc/kubernetes/pki
//	  ca.crt ca.key                              the cluster CA (CN=kubernetes), valid 10 years
//	  apiserver.crt apiserver.key                the API server's serving certificate (CN=kube-apiserver):
//	                                             SANs 127.0.0.1, ::1, localhost, the host's name and
//	                                             address, kubernetes, kubernetes.default,
//	                                             kubernetes.default.svc, kubernetes.default.svc.cluster.local
//	                                             and 10.96.0.1, the kubernetes Service's ClusterIP
//	  apiserver-kubelet-client.crt .key          the API server's client certificate for calling kubelets
//	                                             (logs, exec): CN=kube-apiserver-kubelet-client, no group,
//	                                             as kubeadm v1.37 issues it
//	  admin.crt .key                             CN=admin, O=system:masters
//	  kube-scheduler.crt .key                    CN=system:kube-scheduler
//	  kube-controller-manager.crt .key           CN=system:kube-controller-manager
//	  developer.crt .key                         CN=developer, O=developers
//	  viewer.crt .key                            CN=viewer, O=viewers
//	  NODE.crt NODE.key                          a kubelet's client certificate: CN=system:node:NODE, O=system:nodes
//	  kubelet-NODE.crt kubelet-NODE.key          a kubelet's serving certificate (its port 10250 API):
//	                                             CN=system:node:NODE, SANs its name and addresses
//	<state>/kubeconfigs/                         mode 0700
//	  admin.kubeconfig kube-scheduler.kubeconfig kube-controller-manager.kubeconfig
//	  developer.kubeconfig viewer.kubeconfig NODE.kubeconfig
//
// Keys are mode 0600, certificates 0644, kubeconfigs 0600 (they embed a
// key). Certificates are valid one year, the CA ten, as kubeadm issues
// them. The names are kubeadm's for the CA (kubernetes), the API server's
// certificates and the components' (system:kube-scheduler,
// system:kube-controller-manager, system:node:NODE in system:nodes); the
// administrator is Kubernetes the Hard Way's admin in system:masters, where
// kubeadm's admin.conf is kubernetes-admin in kubeadm:cluster-admins (and
// its super-admin.conf is in system:masters).
//
// Each kubeconfig is what kubeadm's admin.conf is: one cluster, "podlab",
// whose server is https://127.0.0.1:6443 and whose certificate-authority-data
// is ca.crt; one user, named by the certificate's CN, with the certificate and
// key embedded (client-certificate-data, client-key-data); and one context,
// USER@podlab, the current one. `kubectl --kubeconfig FILE` and client-go's
// clientcmd read them as they are.
//
// # Run again
//
// Ensure keeps what is still good: the CA always (a new CA would make every
// credential handed out so far worthless), and each certificate whose key
// matches, which the CA signed, whose subject, usages and SANs are still the
// ones wanted, and which has more than 30 days left. It re-issues only the
// others, and says which and why. A damaged ca.crt, or a ca.key that is not
// ca.crt's, is an error that says how to start over: nothing here guesses
// which of the two to trust.
//
// The package knows nothing of the API server: it writes files. The API
// server's authenticator (steps/apiserver/authn) trusts ca.crt, and
// ServerTLSConfig gives it the TLS settings kube-apiserver uses.
package pki
