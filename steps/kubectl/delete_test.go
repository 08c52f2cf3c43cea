package kubectl

import "testing"

// Golden lines from kubectl v1.37's DeleteOptions.PrintObj.
func TestDeletedLine(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		kind, group, namespace string
		namespaced, force      bool
		want                   string
	}{
		{"pod", "Pod", "", "default", true, false, `pod "web" deleted from default namespace`},
		{"pod, force", "Pod", "", "default", true, true, `pod "web" force deleted from default namespace`},
		{"deployment", "Deployment", "apps", "team", true, false, `deployment.apps "web" deleted from team namespace`},
		{"namespace", "Namespace", "", "", false, false, `namespace "web" deleted`},
		{"webhook configuration", "MutatingWebhookConfiguration", "admissionregistration.k8s.io", "", false, false, `mutatingwebhookconfiguration.admissionregistration.k8s.io "web" deleted`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DeletedLine(tc.kind, tc.group, tc.namespace, tc.namespaced, "web", tc.force); got != tc.want {
				t.Errorf("DeletedLine = %q, want %q", got, tc.want)
			}
		})
	}
}
