package httpwatch

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/storage"
)

// contentTypeJSON is the one media type served, as for custom resources without YAML.
const contentTypeJSON = "application/json"

// errorToAPIStatus turns an error into the Status the apiserver answers with: an API error keeps its
// Status, anything else is a 500 (409 for a storage conflict) with reason "" and the error's text.
//
// Mirrors responsewriters.ErrorToAPIStatus.
func errorToAPIStatus(err error) *metav1.Status {
	// Like upstream, only the error itself is asked for a Status, not the errors it wraps.
	if se, ok := err.(apierrors.APIStatus); ok {
		status := se.Status()
		if len(status.Status) == 0 {
			status.Status = metav1.StatusFailure
		}
		switch status.Status {
		case metav1.StatusSuccess:
			if status.Code == 0 {
				status.Code = http.StatusOK
			}
		default:
			if status.Code == 0 {
				status.Code = http.StatusInternalServerError
			}
		}
		status.Kind = "Status"
		status.APIVersion = "v1"
		return &status
	}
	code := http.StatusInternalServerError
	if storage.IsConflict(err) {
		code = http.StatusConflict
	}
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     int32(code),
		Reason:   metav1.StatusReasonUnknown,
		Message:  err.Error(),
	}
}

// mediaTypeError is a failed content negotiation: 406 for Accept, 415 for Content-Type.
//
// Mirrors negotiation.errNotAcceptable and errUnsupportedMediaType.
type mediaTypeError struct {
	code   int
	reason metav1.StatusReason
	msg    string
}

func (e mediaTypeError) Error() string { return e.msg }

func (e mediaTypeError) Status() metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Code: int32(e.code), Reason: e.reason, Message: e.msg}
}

func notAcceptable(stream bool) error {
	accepted := contentTypeJSON
	if stream {
		accepted += ";stream=watch"
	}
	return mediaTypeError{http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		"only the following media types are accepted: " + accepted}
}

func unsupportedMediaType() error {
	return mediaTypeError{http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		"the body of the request was in an unknown format - accepted media types include: " + contentTypeJSON}
}

// negotiateOutput reports whether the Accept header admits plain JSON. Clauses asking for a
// conversion (as=Table, as=PartialObjectMetadata, aggregated discovery...) or a server version are
// skipped, as for an endpoint that cannot produce them; a stream parameter other than watch skips the
// clause too.
//
// Mirrors negotiation.NegotiateMediaTypeOptions with the JSON serializer only.
func negotiateOutput(accept string) bool {
	if accept == "" {
		return true
	}
	for _, clause := range strings.Split(accept, ",") {
		mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil {
			continue
		}
		typ, sub, _ := strings.Cut(mediaType, "/")
		if !(typ == "application" && (sub == "json" || sub == "*")) && !(typ == "*" && sub == "*") {
			continue
		}
		ok := true
		for k, v := range params {
			switch k {
			case "as", "g", "v":
				ok = false // a transformation this endpoint cannot make
			case "stream":
				ok = ok && (v == "" || v == "watch")
			case "sv":
				ok = ok && v == ""
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// checkInputContentType refuses a body that is not JSON.
//
// Mirrors negotiation.NegotiateInputSerializerForMediaType.
func checkInputContentType(contentType string) error {
	if contentType == "" {
		return nil
	}
	if mediaType, _, err := mime.ParseMediaType(contentType); err == nil && mediaType == contentTypeJSON {
		return nil
	}
	return unsupportedMediaType()
}

// isPrettyPrint mirrors negotiation.isPrettyPrint: ?pretty=true, or a browser or command-line client.
func isPrettyPrint(req *http.Request) bool {
	if strings.Contains(req.URL.RawQuery, "pretty") {
		if pp := req.URL.Query().Get("pretty"); len(pp) > 0 {
			pretty, _ := strconv.ParseBool(pp)
			return pretty
		}
	}
	ua := req.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}

// writeError answers with the error's Status, setting Retry-After when the Status asks for a retry.
//
// Mirrors responsewriters.ErrorNegotiated.
func (s *Server) writeError(w http.ResponseWriter, req *http.Request, err error) {
	status := errorToAPIStatus(err)
	code := int(status.Code)
	if status.Details != nil && status.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(status.Details.RetryAfterSeconds)))
	}
	if code == http.StatusNoContent {
		w.WriteHeader(code)
		return
	}
	s.writeObject(w, req, code, status)
}

// writeObject encodes obj as JSON (indented for pretty-print clients), gzip-compressed when the client
// accepts it and the body is over 128 KiB. When the Accept header admits no JSON, a success becomes
// 406 and an error is written anyway, as raw indented JSON.
//
// Mirrors responsewriters.WriteObjectNegotiated and SerializeObject.
func (s *Server) writeObject(w http.ResponseWriter, req *http.Request, code int, obj runtime.Object) {
	if !negotiateOutput(req.Header.Get("Accept")) {
		if code < http.StatusOK || code >= http.StatusBadRequest {
			writeRawJSON(w, code, obj)
			return
		}
		status := errorToAPIStatus(notAcceptable(false))
		writeRawJSON(w, int(status.Code), status)
		return
	}
	data, err := encodeObject(obj)
	if err == nil && isPrettyPrint(req) {
		var buf bytes.Buffer
		if err = json.Indent(&buf, bytes.TrimSuffix(data, []byte("\n")), "", "  "); err == nil {
			data = buf.Bytes()
		}
	}
	if err != nil {
		status := errorToAPIStatus(err)
		if code >= http.StatusOK && code < http.StatusBadRequest {
			code = int(status.Code)
		}
		data, _ = json.Marshal(status)
	}
	h := w.Header()
	h.Set("Content-Type", contentTypeJSON)
	if !s.features.DisableAPIResponseCompression && len(data) > gzipThresholdBytes && acceptsGzip(req) {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		w.WriteHeader(code)
		gw := gzipPool.Get().(*gzip.Writer)
		gw.Reset(w)
		if _, err := gw.Write(data); err == nil {
			gw.Close()
		}
		gw.Reset(nil)
		gzipPool.Put(gw)
		return
	}
	w.WriteHeader(code)
	w.Write(data)
}

// writeRawJSON mirrors responsewriters.WriteRawJSON.
func writeRawJSON(w http.ResponseWriter, code int, obj any) {
	output, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(code)
	w.Write(output)
}

// encodeObject returns the JSON of obj followed by a newline, as json.Encoder writes it. Unstructured
// objects go through unstructured.UnstructuredJSONScheme, everything else through encoding/json. A
// Status always names its kind.
func encodeObject(obj runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	switch t := obj.(type) {
	case *unstructured.Unstructured, *unstructured.UnstructuredList:
		if err := unstructured.UnstructuredJSONScheme.Encode(t, &buf); err != nil {
			return nil, err
		}
	case *metav1.Status:
		if t.Kind == "" || t.APIVersion == "" {
			c := *t
			c.Kind, c.APIVersion = "Status", "v1"
			t = &c
		}
		if err := json.NewEncoder(&buf).Encode(t); err != nil {
			return nil, err
		}
	default:
		if err := json.NewEncoder(&buf).Encode(obj); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

const (
	// gzipThresholdBytes is the body size above which a response is compressed.
	gzipThresholdBytes = 128 * 1024
	// gzipLevel is the apiserver's: least CPU for nearly the same ratio.
	gzipLevel = 1
)

var gzipPool = sync.Pool{New: func() any {
	gw, err := gzip.NewWriterLevel(nil, gzipLevel)
	if err != nil { // cannot happen: the level is a valid constant
		return gzip.NewWriter(nil)
	}
	return gw
}}

// acceptsGzip mirrors responsewriters.ContentEncodingSupported.
func acceptsGzip(req *http.Request) bool {
	for _, token := range strings.Split(req.Header.Get("Accept-Encoding"), ",") {
		if strings.TrimSpace(token) == "gzip" {
			return true
		}
	}
	return false
}
