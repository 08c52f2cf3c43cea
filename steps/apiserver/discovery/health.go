package discovery

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Check is one named health check, as kube-apiserver's healthz.HealthChecker:
// "etcd" (can the store be read?), "informer-sync", ... Check returns nil
// when healthy.
type Check struct {
	Name  string
	Check func(*http.Request) error
}

// ping is the check every kube-apiserver has: it answers, so it is alive.
func ping() Check {
	return Check{Name: "ping", Check: func(*http.Request) error { return nil }}
}

// healthHandler serves one of /healthz, /livez, /readyz the way
// k8s.io/apiserver's healthz does: "ok" when every check passes; with
// ?verbose one line per check ("[+]ping ok") and "livez check passed";
// ?exclude=NAME skips a check; on a failure 500 with "[-]etcd failed:
// reason withheld" (the reason goes to the server's log, not to anyone who
// asks) and "livez check failed". /livez/NAME runs one check.
func healthHandler(name string, checks []Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("%s is served for GET only", r.URL.Path))
			return
		}
		if one, ok := strings.CutPrefix(r.URL.Path, "/"+name+"/"); ok {
			i := slices.IndexFunc(checks, func(c Check) bool { return c.Name == one })
			if i < 0 {
				writeStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
				return
			}
			if err := checks[i].Check(r); err != nil {
				http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
				return
			}
			writeText(w, "ok")
			return
		}
		excluded := map[string]bool{}
		for _, e := range r.URL.Query()["exclude"] {
			excluded[e] = true
		}
		var out strings.Builder
		failed := false
		for _, c := range checks {
			if excluded[c.Name] {
				delete(excluded, c.Name)
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
				continue
			}
			if err := c.Check(r); err != nil {
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
				failed = true
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
		}
		if len(excluded) > 0 {
			names := make([]string, 0, len(excluded))
			for n := range excluded {
				names = append(names, n)
			}
			slices.Sort(names)
			fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(quoteAll(names), ","))
		}
		if failed {
			http.Error(w, out.String()+name+" check failed", http.StatusInternalServerError)
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; !verbose {
			writeText(w, "ok")
			return
		}
		writeText(w, out.String()+name+" check passed\n")
	})
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return q
}

func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	fmt.Fprint(w, s)
}
