package discovery

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Content types of the discovery documents. Aggregated discovery is asked
// for, and answered, as JSON with the group, version and kind as
// parameters; client-go's discovery client sends
// "ContentTypeAggregated,application/json" and reads what the answer's
// Content-Type says it got.
const (
	ContentTypeAggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	contentTypeJSON       = "application/json"
)

// Options configure the Handler.
type Options struct {
	// Checks run at /healthz, /livez and /readyz after "ping", in order:
	// "etcd" for the store, say.
	Checks []Check
	// ReadyChecks run at /readyz only, after Checks: what must hold before
	// the server takes traffic ("informer-sync", "shutdown").
	ReadyChecks []Check
}

// document is a served document with its ETag: the SHA-512 of its bytes
// in upper-case hex, as kube-apiserver computes it for OpenAPI.
type document struct {
	data []byte
	etag string
}

func newDocument(b []byte) document {
	return document{data: b, etag: fmt.Sprintf("%X", sha512.Sum512(b))}
}

// server holds the embedded documents, read once.
type server struct {
	versions    metav1.APIVersions  // /api, its serverAddressByClientCIDRs filled at each request
	legacy      map[string]document // "/apis", "/api/v1", "/apis/apps", "/apis/apps/v1"
	aggregated  map[string]document // "/api", "/apis"
	version     document            // /version
	openapiV2   document            // JSON
	openapiV2Pb document            // the same, as protobuf
	openapiV3   map[string]document // "api/v1", "apis/apps/v1", ... as in the index
	v3Index     document
}

// Handler serves what kube-apiserver serves besides its resources: the
// discovery documents (/api, /apis, each group and group version, in the
// unaggregated and the aggregated form), /version, OpenAPI v2
// (/openapi/v2) and v3 (/openapi/v3 and each group version's document),
// and the health endpoints /healthz, /livez and /readyz. Any other path
// gets kube's 404 Status, so it can be mounted as the fallback of the
// resource handlers. It fails if the embedded documents cannot be read.
func Handler(opts Options) (http.Handler, error) {
	s, err := load()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api", s.serveAPI)
	mux.HandleFunc("/apis", s.serveAPIs)
	mux.HandleFunc("/api/", s.serveLegacy)
	mux.HandleFunc("/apis/", s.serveLegacy)
	mux.HandleFunc("/version", s.serveVersion)
	mux.HandleFunc("/version/", s.serveVersion)
	mux.HandleFunc("/openapi/v2", s.serveOpenAPIV2)
	mux.HandleFunc("/openapi/v3", s.serveOpenAPIV3Index)
	mux.HandleFunc("/openapi/v3/", s.serveOpenAPIV3)
	live := append([]Check{ping()}, opts.Checks...)
	ready := append(append([]Check{}, live...), opts.ReadyChecks...)
	for name, checks := range map[string][]Check{"healthz": live, "livez": live, "readyz": ready} {
		h := healthHandler(name, checks)
		mux.Handle("/"+name, h)
		mux.Handle("/"+name+"/", h)
	}
	mux.HandleFunc("/", notFound)
	return mux, nil
}

func load() (*server, error) {
	s := &server{legacy: map[string]document{}, aggregated: map[string]document{}, openapiV3: map[string]document{}}
	names, err := docNames("discovery")
	if err != nil {
		return nil, fmt.Errorf("listing the embedded discovery documents (run go run ./steps/apiserver/discovery/gen): %w", err)
	}
	for _, name := range names {
		b, err := readDoc(name)
		if err != nil {
			return nil, err
		}
		base := strings.TrimSuffix(path.Base(name), ".json")
		switch {
		case base == "api":
			if err := json.Unmarshal(b, &s.versions); err != nil {
				return nil, fmt.Errorf("reading embedded %s: %w", name, err)
			}
		case strings.HasPrefix(base, "aggregated_"):
			s.aggregated["/"+strings.TrimPrefix(base, "aggregated_")] = newDocument(compact(b))
		default:
			s.legacy["/"+strings.ReplaceAll(base, "__", "/")] = newDocument(compact(b))
		}
	}
	if len(s.versions.Versions) == 0 || s.aggregated["/api"].data == nil || s.aggregated["/apis"].data == nil || s.legacy["/apis"].data == nil {
		return nil, fmt.Errorf("the embedded discovery documents are incomplete (run go run ./steps/apiserver/discovery/gen)")
	}

	src, err := EmbeddedSource()
	if err != nil {
		return nil, err
	}
	v, err := Version(src)
	if err != nil {
		return nil, err
	}
	vb, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	s.version = newDocument(vb)

	v2, err := readDoc("openapi/v2/swagger.json.gz")
	if err != nil {
		return nil, err
	}
	s.openapiV2 = newDocument(v2)
	v2pb, err := readDoc("openapi/v2/swagger.pb.gz")
	if err != nil {
		return nil, err
	}
	s.openapiV2Pb = newDocument(v2pb)

	names, err = docNames("openapi/v3")
	if err != nil {
		return nil, fmt.Errorf("listing the embedded OpenAPI v3 documents: %w", err)
	}
	type entry struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	index := map[string]map[string]entry{"paths": {}}
	for _, name := range names {
		b, err := readDoc(name)
		if err != nil {
			return nil, err
		}
		gv := strings.ReplaceAll(strings.TrimSuffix(path.Base(name), ".json.gz"), "__", "/")
		d := newDocument(b)
		s.openapiV3[gv] = d
		index["paths"][gv] = entry{ServerRelativeURL: serverRelativeURL(gv, d.etag)}
	}
	ib, err := json.Marshal(index)
	if err != nil {
		return nil, err
	}
	s.v3Index = newDocument(ib)
	return s, nil
}

// serverRelativeURL is where the index says a group version's document
// is: /openapi/v3/apis/apps/v1?hash=ETAG. A client that asks with the hash
// may cache the answer forever; a changed document gets a new URL.
func serverRelativeURL(gv, etag string) string {
	u := url.URL{Path: path.Join("/openapi/v3", gv), RawQuery: url.Values{"hash": {etag}}.Encode()}
	return u.String()
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// wantsAggregated reads an Accept header the way kube-apiserver chooses the
// discovery format: the first acceptable clause wins; aggregated
// discovery v2 (with or without profile=nopeer) or plain JSON. ok is false
// when nothing acceptable is asked for.
func wantsAggregated(accept string) (aggregated, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return false, true
	}
	for _, clause := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json":
			if params["g"] == "" && params["as"] == "" {
				return false, true
			}
			if params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList" {
				return true, true
			}
		case "*/*", "application/*":
			return false, true
		}
	}
	return false, false
}

// serveDiscovery answers /api or /apis in the format asked for.
func (s *server) serveDiscovery(w http.ResponseWriter, r *http.Request, legacy func() (document, error)) {
	if !getOnly(w, r) {
		return
	}
	aggregated, ok := wantsAggregated(r.Header.Get("Accept"))
	w.Header().Add("Vary", "Accept")
	switch {
	case !ok:
		writeStatus(w, http.StatusNotAcceptable, "NotAcceptable",
			fmt.Sprintf("only the following media types are accepted: %s, %s", contentTypeJSON, ContentTypeAggregated))
	case aggregated:
		serveDocument(w, r, s.aggregated[r.URL.Path], ContentTypeAggregated)
	default:
		d, err := legacy()
		if err != nil {
			writeStatus(w, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
		serveDocument(w, r, d, contentTypeJSON)
	}
}

func (s *server) serveAPI(w http.ResponseWriter, r *http.Request) {
	s.serveDiscovery(w, r, func() (document, error) {
		// kube-apiserver tells each client the address to reach it by;
		// podlab answers with the address the client used.
		v := s.versions
		v.ServerAddressByClientCIDRs = []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}
		b, err := json.Marshal(v)
		return newDocument(b), err
	})
}

func (s *server) serveAPIs(w http.ResponseWriter, r *http.Request) {
	s.serveDiscovery(w, r, func() (document, error) { return s.legacy["/apis"], nil })
}

// serveLegacy answers /api/v1, /apis/GROUP and /apis/GROUP/VERSION; any
// deeper path is a resource, which this handler does not serve.
func (s *server) serveLegacy(w http.ResponseWriter, r *http.Request) {
	d, ok := s.legacy[strings.TrimSuffix(r.URL.Path, "/")]
	if !ok {
		notFound(w, r)
		return
	}
	if !getOnly(w, r) {
		return
	}
	serveDocument(w, r, d, contentTypeJSON)
}

func (s *server) serveVersion(w http.ResponseWriter, r *http.Request) {
	if strings.TrimSuffix(r.URL.Path, "/") != "/version" {
		notFound(w, r)
		return
	}
	if getOnly(w, r) {
		serveDocument(w, r, s.version, contentTypeJSON)
	}
}

// The media types of OpenAPI v2 as protobuf: client-go's OpenAPISchema
// asks for the older spelling alone; the answer is labelled with the newer.
const (
	contentTypeOpenAPIV2Pb           = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	contentTypeOpenAPIV2PbDeprecated = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
)

// serveOpenAPIV2 serves swagger.json, as JSON or protobuf, whichever the
// Accept header names first (kube-openapi's handler). kubectl v1.37 reads
// OpenAPI v3 and falls back to v2 (as protobuf) only where v3 is missing:
// `kubectl explain --output plaintext-openapiv2`, client-side validation
// against a server without fieldValidation, apply's patch for a kind v3
// lacks. Anything else gets 406.
func (s *server) serveOpenAPIV2(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	w.Header().Add("Vary", "Accept")
	accept := r.Header.Get("Accept")
	if strings.TrimSpace(accept) == "" {
		accept = "*/*"
	}
	for _, clause := range strings.Split(accept, ",") {
		// Not mime.ParseMediaType: the deprecated type's "@" is not a token
		// character.
		mt, _, _ := strings.Cut(clause, ";")
		switch strings.TrimSpace(mt) {
		case "application/json", "application/*", "*/*":
			serveDocument(w, r, s.openapiV2, contentTypeJSON)
			return
		case contentTypeOpenAPIV2Pb, contentTypeOpenAPIV2PbDeprecated:
			serveDocument(w, r, s.openapiV2Pb, contentTypeOpenAPIV2Pb)
			return
		}
	}
	writeStatus(w, http.StatusNotAcceptable, "NotAcceptable",
		fmt.Sprintf("only the following media types are accepted: %s, %s", contentTypeJSON, contentTypeOpenAPIV2Pb))
}

func (s *server) serveOpenAPIV3Index(w http.ResponseWriter, r *http.Request) {
	if getOnly(w, r) {
		serveDocument(w, r, s.v3Index, contentTypeJSON)
	}
}

// serveOpenAPIV3 serves one group version's document as kube-openapi's
// handler3 does: with ?hash= equal to its ETag it may be cached forever;
// with a stale hash it redirects (301) to the current URL.
func (s *server) serveOpenAPIV3(w http.ResponseWriter, r *http.Request) {
	gv := strings.TrimPrefix(r.URL.Path, "/openapi/v3/")
	d, ok := s.openapiV3[gv]
	if !ok {
		notFound(w, r)
		return
	}
	if !getOnly(w, r) {
		return
	}
	w.Header().Add("Vary", "Accept")
	if !acceptsJSON(r.Header.Get("Accept")) {
		w.WriteHeader(http.StatusNotAcceptable)
		return
	}
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if hash != d.etag {
			http.Redirect(w, r, serverRelativeURL(gv, d.etag), http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).Format(time.RFC1123))
	}
	serveDocument(w, r, d, contentTypeJSON)
}

// acceptsJSON reports whether an Accept header admits application/json.
func acceptsJSON(accept string) bool {
	if strings.TrimSpace(accept) == "" {
		return true
	}
	for _, clause := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err == nil && (mt == "application/json" || mt == "*/*" || mt == "application/*") {
			return true
		}
	}
	return false
}

// serveDocument writes a document with its ETag; http.ServeContent answers
// If-None-Match with 304, which is how clients revalidate their caches.
func serveDocument(w http.ResponseWriter, r *http.Request, d document, contentType string) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Etag", strconv.Quote(d.etag))
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(d.data))
}

func getOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed",
		fmt.Sprintf("the server does not allow this method on the requested resource (%s %s)", r.Method, r.URL.Path))
	return false
}

// notFound is kube-apiserver's answer to a path it does not serve.
func notFound(w http.ResponseWriter, _ *http.Request) {
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
}

// writeStatus writes a metav1.Status, the body of every error
// kube-apiserver returns; kubectl prints its message.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Details:  &metav1.StatusDetails{},
		Code:     int32(code),
	}
	b, _ := json.Marshal(st)
	w.Header().Set("Content-Type", contentTypeJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
