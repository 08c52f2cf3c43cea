package apiserver

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/podlab/podlab/steps/apiserver/admission"
	"github.com/podlab/podlab/steps/apiserver/discovery"
)

// DefaultFieldManager is the manager podlab's in-process clients write as
// when they name none (WithFieldManager): kube-apiserver takes the first
// segment of the User-Agent ("kubectl-create", "kube-scheduler"), and an
// in-process client has none.
const DefaultFieldManager = "podlab"

// bootstrapFieldManager is the manager of the API server's own writes (the
// RBAC policy it makes at start), as kube-apiserver names itself.
const bootstrapFieldManager = "kube-apiserver"

// WithFieldManager names the manager the client's writes are recorded
// under in metadata.managedFields: "podlab-run" for `podlab run`, or what
// an HTTP request says (?fieldManager=, else its User-Agent's first
// segment, "kubectl-client-side-apply").
func WithFieldManager(name string) ClientOption {
	return func(c *Client) { c.fieldManager = name }
}

// manager is the name c's writes are recorded under.
func (c *Client) manager() string {
	switch {
	case c.fieldManager != "":
		return c.fieldManager
	case c.bootstrap:
		return bootstrapFieldManager
	}
	return DefaultFieldManager
}

// fieldManagers hold what kube-apiserver's field manager needs: a type
// converter, built from the OpenAPI models of the embedded swagger document
// (once, at the first write: parsing takes ~35 ms, which a `podlab get`
// never pays), and one managedfields.FieldManager per kind and
// subresource.
type fieldManagers struct {
	once sync.Once
	tc   managedfields.TypeConverter
	err  error

	mu   sync.Mutex
	byGK map[string]*managedfields.FieldManager
}

// fieldManager returns the field manager of res's objects, or of their
// status (sub "status"), as kube-apiserver makes one per endpoint.
func (s *Server) fieldManager(res Resource, sub string) (*managedfields.FieldManager, error) {
	m := &s.managed
	m.once.Do(func() {
		defs, err := discovery.OpenAPIDefinitions()
		if err != nil {
			m.err = err
			return
		}
		m.tc, m.err = managedfields.NewTypeConverter(defs, false)
		if m.err != nil {
			m.err = fmt.Errorf("building the field manager's type converter from the embedded OpenAPI models: %w", m.err)
		}
	})
	if m.err != nil {
		return nil, m.err
	}
	key := res.GroupResource().String() + "/" + sub
	m.mu.Lock()
	defer m.mu.Unlock()
	if fm := m.byGK[key]; fm != nil {
		return fm, nil
	}
	gvk := res.GroupVersion().WithKind(res.Kind)
	fm, err := managedfields.NewDefaultFieldManager(m.tc, scheme.Scheme, defaulter{}, scheme.Scheme,
		gvk, gvk.GroupVersion(), sub, resetFields(res, sub))
	if err != nil {
		return nil, fmt.Errorf("making the field manager of %s: %w", res.Name, err)
	}
	if m.byGK == nil {
		m.byGK = map[string]*managedfields.FieldManager{}
	}
	m.byGK[key] = fm
	return fm, nil
}

// resetFields are the fields a write through an endpoint cannot change, so
// its manager never owns them (kube's strategies' GetResetFields): the
// status through the object, the spec through its status.
func resetFields(res Resource, sub string) map[fieldpath.APIVersion]fieldpath.Filter {
	if !res.HasStatus {
		return nil
	}
	reset := fieldpath.MakePathOrDie("status")
	if sub == "status" {
		reset = fieldpath.MakePathOrDie("spec")
	}
	return map[fieldpath.APIVersion]fieldpath.Filter{
		fieldpath.APIVersion(res.GroupVersion().String()): fieldpath.NewExcludeSetFilter(fieldpath.NewSet(reset)),
	}
}

// defaulter sets Kubernetes' defaults on what an apply produced, as
// kube-apiserver's scheme does, so the applier is not told it changed
// fields the defaults fill in.
type defaulter struct{}

func (defaulter) Default(obj runtime.Object) { admission.Default(obj) }

// trackUpdate records in obj's managedFields what the write of obj over
// old (nil for a create) changed, under c's manager, with operation Update:
// what kube-apiserver's create, update and non-apply patch handlers do
// with fieldmanager.UpdateNoErrors. It never fails the write: kube logs a
// failure to compute the fields and stores the object without them.
func (c *Client) trackUpdate(res Resource, sub string, old, obj Object) {
	fm, err := c.s.fieldManager(res, sub)
	if err != nil {
		obj.SetManagedFields(nil)
		return
	}
	live := old
	if live == nil {
		live = res.New()
		live.GetObjectKind().SetGroupVersionKind(res.GroupVersion().WithKind(res.Kind))
	}
	out := fm.UpdateNoErrors(live, obj, c.manager())
	if m, ok := out.(metav1.Object); ok {
		obj.SetManagedFields(m.GetManagedFields())
	}
}

// trackCreate records a create in obj's managedFields, as trackUpdate
// does, on a copy with Kubernetes' defaults set: kube-apiserver decodes and
// defaults a new object before its field manager sees it, so the defaults
// (a pod's dnsPolicy, a container's imagePullPolicy) are the creator's.
func (c *Client) trackCreate(res Resource, obj Object) {
	cp := obj.DeepCopyObject().(Object)
	admission.Default(cp)
	c.trackUpdate(res, "", nil, cp)
	obj.SetManagedFields(cp.GetManagedFields())
}
