package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// The errors the handler answers itself, in kube-apiserver's words.
var (
	// errUnauthorized: credentials that prove nothing.
	errUnauthorized = apierrors.NewUnauthorized("Unauthorized")
	// errNotFound: a path that names nothing served.
	errNotFound = apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "", 0, false)
)

// writeError answers err as a metav1.Status: a status error with its own
// code and reason, anything else 500 InternalError.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var se apierrors.APIStatus
	var st metav1.Status
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The server is stopping (Serve cancels its requests): as
		// kube-apiserver's retry-after filter, a 429 with Retry-After, which
		// client-go waits out and retries, rather than a 500.
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Connection", "close")
		st = apierrors.NewTooManyRequests("The apiserver is shutting down, please try again later.", 1).ErrStatus
	} else if errors.As(err, &se) {
		st = se.Status()
	} else {
		st = apierrors.NewInternalError(err).ErrStatus
	}
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	st.Status = metav1.StatusFailure
	writeStatus(w, int(st.Code), st)
}

// writeStatus writes a Status with the HTTP code code.
func writeStatus(w http.ResponseWriter, code int, st metav1.Status) {
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, code, &st)
}

// writeObject answers an object of Kubernetes' API (a Pod, a PodList...)
// in the encoding the client accepted: protobuf, as kube-apiserver's
// protobuf serializer writes it ("k8s\x00", then a runtime.Unknown naming
// the kind around the object's protobuf), or JSON.
func writeObject(w http.ResponseWriter, code int, obj runtime.Object, acc accept) {
	if !acc.protobuf {
		writeJSON(w, code, obj)
		return
	}
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		if gvks, _, err := scheme.Scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		}
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		writeJSON(w, http.StatusInternalServerError, apierrors.NewInternalError(fmt.Errorf("encoding the response in protobuf: %w", err)).ErrStatus)
		return
	}
	w.Header().Set("Content-Type", mediaProtobuf)
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		data, _ = json.Marshal(apierrors.NewInternalError(fmt.Errorf("encoding the response: %w", err)).ErrStatus)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(data, '\n'))
}

// The media types of request bodies podlab reads.
const (
	mediaJSON     = "application/json"
	mediaYAML     = "application/yaml"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// readBody reads a request body of at most MaxBodyBytes, as JSON: a YAML
// body (Content-Type application/yaml) is converted. A protobuf body
// (what client-go's typed clients send for Kubernetes' own types) is
// returned as it is, with proto true.
func readBody(r *http.Request) (data []byte, proto bool, err error) {
	data, err = readLimited(r)
	if err != nil {
		return nil, false, err
	}
	mt := mediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "", mediaJSON, "*/*":
	case mediaYAML:
		if data, err = yaml.YAMLToJSON(data); err != nil {
			return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the body is not YAML: %v", err))
		}
	case mediaProtobuf:
		return data, true, nil
	default:
		return nil, false, unsupportedMediaType(mt, mediaJSON, mediaYAML, mediaProtobuf)
	}
	return data, false, nil
}

// readJSONBody reads a body that is JSON whatever its Content-Type says:
// a patch.
func readJSONBody(r *http.Request) ([]byte, error) {
	return readLimited(r)
}

// maxDiscardBytes is how much of a body over MaxBodyBytes is read and
// thrown away before the answer.
const maxDiscardBytes = 64 << 20

// readLimited reads a request body of at most MaxBodyBytes, as
// kube-apiserver's handlers do (limitedReadBody); a larger one is 413
// "Request entity too large: limit is 3145728". The rest of a larger body
// is read and thrown away (up to maxDiscardBytes) before the answer: a
// handler that answers before the body is in makes the server reset the
// stream (HTTP/2: RST_STREAM, which can overtake the answer's DATA frame;
// HTTP/1.1: the connection is closed), and a client such as curl then
// sees the 413's headers and no Status.
func readLimited(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading the request body: %v", err))
	}
	if len(data) > MaxBodyBytes {
		io.Copy(io.Discard, io.LimitReader(r.Body, maxDiscardBytes)) // an error here changes nothing: the answer is 413
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxBodyBytes))
	}
	return data, nil
}

func unsupportedMediaType(mt string, accepted ...string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", strings.Join(accepted, ", ")), 0, false)
}

func mediaType(header string) string {
	if header == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return header
	}
	return mt
}

// accept is what a response may be, from the request's Accept header.
type accept struct {
	table         bool   // a meta.k8s.io/v1 Table
	includeObject string // the Table's includeObject parameter
	// protobuf: the object in protobuf (application/vnd.kubernetes.protobuf),
	// what client-go's typed clients ask for first
	protobuf bool
}

// negotiate reads the Accept header: a Table when the client asks for one
// first and a TableConvertor is set, protobuf when the client asks for it
// first (client-go's typed clients: "application/vnd.kubernetes.protobuf,
// application/json"), otherwise JSON when the client takes it; 406 Not
// Acceptable, in kube's words, when it takes nothing podlab serves (CBOR
// only, a Table in protobuf).
func negotiate(r *http.Request, tables bool) (accept, error) {
	header := r.Header.Get("Accept")
	if header == "" {
		return accept{}, nil
	}
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", "application/*", "*/*":
		case mediaProtobuf:
			if params["as"] == "" {
				return accept{protobuf: true}, nil
			}
			continue
		default:
			continue
		}
		if params["as"] == "" {
			return accept{}, nil
		}
		if params["as"] == "Table" && params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") && tables {
			opts, err := tableOptions(r)
			if err != nil {
				return accept{}, err
			}
			inc := string(opts.IncludeObject)
			if inc == "" {
				inc = string(metav1.IncludeMetadata)
			}
			return accept{table: true, includeObject: inc}, nil
		}
	}
	return accept{}, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "",
		"only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf", 0, false)
}

// tableOptions reads the Table's options from the query, not from the
// Accept header (kubectl sends includeObject=Object as a query parameter
// when it sorts by a field, and sorts the rows by their objects), and
// refuses a bad includeObject with kube-apiserver's 400, as its
// optionsForTransform does.
func tableOptions(r *http.Request) (*metav1.TableOptions, error) {
	opts := &metav1.TableOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", err))
	}
	switch errs := metav1validation.ValidateTableOptions(opts); len(errs) {
	case 0:
		return opts, nil
	case 1:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs[0].Error()))
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs))
	}
}

// summarize is the start of a body, for an error about it, as kube's
// summarizeData shows it.
func summarize(data []byte, max int) string {
	data = bytes.TrimSpace(data)
	if len(data) > max {
		return string(data[:max]) + " ..."
	}
	return string(data)
}
