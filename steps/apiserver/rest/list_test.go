package rest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	"github.com/podlab/podlab/steps/store"
)

// createPods creates pods p00..p(n-1) and returns them by name.
func createPods(t *testing.T, l *lab, n int) map[string]*corev1.Pod {
	t.Helper()
	pods := l.clientset("admin").CoreV1().Pods("default")
	made := map[string]*corev1.Pod{}
	for i := range n {
		p, err := pods.Create(ctx(t), testPod(fmt.Sprintf("p%02d", i)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		made[p.Name] = p
	}
	return made
}

// podList GETs a pod list with the query q, as admin.
func podList(t *testing.T, l *lab, q string) (int, corev1.PodList, metav1.Status) {
	t.Helper()
	code, body, _ := l.do("admin", "GET", "/api/v1/namespaces/default/pods?"+q, "", nil)
	var pl corev1.PodList
	var st metav1.Status
	if code == http.StatusOK {
		if err := json.Unmarshal(body, &pl); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
	} else {
		st = status(t, body)
	}
	return code, pl, st
}

func podNames(pods []corev1.Pod) string {
	var n []string
	for _, p := range pods {
		n = append(n, p.Name+"@"+p.ResourceVersion)
	}
	return strings.Join(n, " ")
}

// A list read in pages by client-go's pager is one snapshot, at the first
// page's revision: objects created, changed or deleted between pages do
// not show in the later pages, as against kube-apiserver (which reads etcd
// at the continue token's revision).
func TestList_PagesAreOneSnapshot(t *testing.T) {
	l := newLab(t, nil)
	before := createPods(t, l, 10)
	pods := l.clientset("admin").CoreV1().Pods("default")
	pages := 0
	p := pager.New(func(c context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		list, err := pods.List(c, opts)
		if err != nil {
			return nil, err
		}
		if pages++; pages == 1 {
			if list.Continue == "" || list.RemainingItemCount == nil || *list.RemainingItemCount != 6 {
				t.Errorf("first page: continue %q, remainingItemCount %v; want a token and 6", list.Continue, list.RemainingItemCount)
			}
			// Between the pages: p05 changes, p07 goes, p04a and p99 come.
			p05 := before["p05"].DeepCopy()
			p05.Labels = map[string]string{"changed": "yes"}
			if _, err := pods.Update(c, p05, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := pods.Delete(c, "p07", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"p04a", "p99"} {
				if _, err := pods.Create(c, testPod(n), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return list, nil
	})
	p.PageSize = 4
	var got []corev1.Pod
	if err := p.EachListItem(ctx(t), metav1.ListOptions{}, func(o runtime.Object) error {
		got = append(got, *o.(*corev1.Pod))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var want []corev1.Pod
	for i := range 10 {
		want = append(want, *before[fmt.Sprintf("p%02d", i)])
	}
	if pages != 3 || podNames(got) != podNames(want) {
		t.Errorf("%d pages:\n%s\nwant 3 pages of the pods as they were:\n%s", pages, podNames(got), podNames(want))
	}
	for _, p := range got {
		if p.Name == "p05" && p.Labels["changed"] != "" {
			t.Errorf("p05 in a later page has the labels of a later update: %v", p.Labels)
		}
	}
	// a new list sees the changes
	_, now, _ := podList(t, l, "")
	if n := podNames(now.Items); !strings.Contains(n, "p04a") || strings.Contains(n, "p07@") || !strings.Contains(n, "p99") {
		t.Errorf("a new list: %s", n)
	}
}

// A continue token whose revision was compacted gets kube's 410, with a
// token that continues at the current revision.
func TestList_ContinueCompactedIs410(t *testing.T) {
	l := newLab(t, []store.Option{store.WithHistory(5)})
	createPods(t, l, 6)
	code, first, _ := podList(t, l, "limit=2")
	if code != 200 || first.Continue == "" {
		t.Fatalf("first page: %d, continue %q", code, first.Continue)
	}
	pods := l.clientset("admin").CoreV1().Pods("default")
	for i := range 10 {
		if _, err := pods.Create(ctx(t), testPod(fmt.Sprintf("q%02d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	code, _, st := podList(t, l, "limit=2&continue="+url.QueryEscape(first.Continue))
	want := "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
	if code != http.StatusGone || st.Reason != metav1.StatusReasonExpired || st.Message != want || st.Continue == "" {
		t.Fatalf("%d %+v, want 410 Expired with kube's text and a new token", code, st)
	}
	// client-go sees what kube's client sees
	_, err := pods.List(ctx(t), metav1.ListOptions{Limit: 2, Continue: first.Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("client-go: %v, want IsResourceExpired", err)
	}
	// the new token goes on at the current revision, after the first page
	code, rest, _ := podList(t, l, "continue="+url.QueryEscape(st.Continue))
	if code != 200 || podNames(rest.Items) == "" || strings.HasPrefix(podNames(rest.Items), "p00") || strings.HasPrefix(podNames(rest.Items), "p01") || !strings.Contains(podNames(rest.Items), "q09") {
		t.Errorf("continuing inconsistently: %d %s", code, podNames(rest.Items))
	}
}

// resourceVersion and resourceVersionMatch on a list, as kube v1.37 serves
// them; every bad combination gets kube's error.
func TestList_ResourceVersion(t *testing.T) {
	l := newLab(t, []store.Option{store.WithHistory(20)})
	made := createPods(t, l, 3)
	rv := made["p02"].ResourceVersion
	pods := l.clientset("admin").CoreV1().Pods("default")
	if err := pods.Delete(ctx(t), "p01", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	token := func(v string, rv int64, start string) string {
		b, _ := json.Marshal(map[string]any{"v": v, "rv": rv, "start": start})
		return url.QueryEscape(base64.RawURLEncoding.EncodeToString(b))
	}
	tests := []struct {
		name  string
		query string
		code  int
		want  string // the pods, or the Status message
	}{
		{"Exact reads the state at that revision", "resourceVersionMatch=Exact&resourceVersion=" + rv, 200, "p00 p01 p02"},
		{"a limit and a resourceVersion read at it (kube's legacy rule)", "limit=10&resourceVersion=" + rv, 200, "p00 p01 p02"},
		{"NotOlderThan reads the current state", "resourceVersionMatch=NotOlderThan&resourceVersion=" + rv, 200, "p00 p02"},
		{"resourceVersion=0 reads the current state", "resourceVersion=0", 200, "p00 p02"},
		{"a resourceVersion alone reads the current state", "resourceVersion=" + rv, 200, "p00 p02"},
		{"Exact in the future", "resourceVersionMatch=Exact&resourceVersion=1000", 504, "Too large resource version: 1000, current: "},
		{"a match without a resourceVersion", "resourceVersionMatch=Exact", 422,
			`ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided`},
		{"Exact at 0", "resourceVersionMatch=Exact&resourceVersion=0", 422, `resourceVersionMatch "exact" is forbidden for resourceVersion "0"`},
		{"an unknown match", "resourceVersionMatch=Newest&resourceVersion=1", 422, `resourceVersionMatch: Unsupported value: "Newest"`},
		{"a match and a continue token", "resourceVersionMatch=Exact&resourceVersion=1&continue=" + token("meta.k8s.io/v1", 1, "p00"), 422,
			"resourceVersionMatch is forbidden when continue is provided"},
		{"a resourceVersion and a continue token", "resourceVersion=1&continue=" + token("meta.k8s.io/v1", 1, "p00"), 400,
			"specifying resource version is not allowed when using continue"},
		{"a resourceVersion that is not a number", "resourceVersion=abc", 400, "invalid resource version"},
		{"a token that is not base64", "continue=%25%25", 400, "invalid continue token: continue key is not valid: illegal base64 data"},
		{"a token of another version", "continue=" + token("meta.k8s.io/v2", 1, "p00"), 400,
			"invalid continue token: continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2"},
		{"a token without a revision", "continue=" + token("meta.k8s.io/v1", 0, "p00"), 400,
			"invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"},
		{"a token without a start", "continue=" + token("meta.k8s.io/v1", 1, ""), 400,
			"invalid continue token: continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"},
		{"a token that climbs out of the namespace", "continue=" + token("meta.k8s.io/v1", 1, "../kube-system/x"), 400,
			"invalid continue token: continue key is not valid: ../kube-system/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, pl, st := podList(t, l, tt.query)
			if code != tt.code {
				t.Fatalf("%d %s %+v, want %d", code, podNames(pl.Items), st, tt.code)
			}
			if code != 200 {
				if !strings.Contains(st.Message, tt.want) || st.Code != int32(code) {
					t.Errorf("Status %+v, want %q", st, tt.want)
				}
				return
			}
			var got []string
			for _, p := range pl.Items {
				if strings.HasPrefix(p.Name, "p") {
					got = append(got, p.Name)
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("pods %v, want %s", got, tt.want)
			}
		})
	}
	t.Run("Exact at a compacted revision", func(t *testing.T) {
		for i := range 25 { // history 20: compaction passes rv
			if _, err := pods.Create(ctx(t), testPod(fmt.Sprintf("z%02d", i)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		code, _, st := podList(t, l, "resourceVersionMatch=Exact&resourceVersion="+rv)
		if code != 410 || st.Reason != metav1.StatusReasonExpired || st.Message != "The resourceVersion for the provided list is too old." {
			t.Errorf("%d %+v, want kube's 410", code, st)
		}
	})
	t.Run("NotOlderThan in the future waits, then 504", func(t *testing.T) {
		start := time.Now()
		code, _, st := podList(t, l, "resourceVersionMatch=NotOlderThan&resourceVersion=1000")
		if code != 504 || !strings.Contains(st.Message, "Too large resource version: 1000") || time.Since(start) < 2*time.Second {
			t.Errorf("%d %+v after %v, want 504 after about 3s", code, st, time.Since(start))
		}
	})
}
