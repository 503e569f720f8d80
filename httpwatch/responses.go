package httpwatch

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/storage"
)

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

// writeError answers with the error's Status, setting Retry-After when the Status asks for a retry.
//
// Mirrors responsewriters.ErrorNegotiated.
func (s *Server) writeError(w http.ResponseWriter, req *http.Request, err error) {
	s.writeErrorFor(w, req, metaEndpoint, err)
}

func (s *Server) writeErrorFor(w http.ResponseWriter, req *http.Request, ep endpoint, err error) {
	status := errorToAPIStatus(err)
	code := int(status.Code)
	if status.Details != nil && status.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(status.Details.RetryAfterSeconds)))
	}
	if code == http.StatusNoContent {
		w.WriteHeader(code)
		return
	}
	// A Status is never converted: negotiate its format alone.
	n, ok := ep.forErrors().negotiate(req.Header.Get("Accept"), false)
	if !ok || n.format == nil {
		writeRawJSON(w, code, status)
		return
	}
	s.writeEncoded(w, req, code, negotiated{format: n.format, pretty: n.pretty || isPrettyPrint(req)}, status)
}

// writeObject answers with obj in the format the Accept header asks for among the meta endpoint's
// (JSON, YAML, protobuf).
func (s *Server) writeObject(w http.ResponseWriter, req *http.Request, code int, obj runtime.Object) {
	s.writeObjectFor(w, req, metaEndpoint, code, obj, nil)
}

// writeObjectFor answers with obj in the format the endpoint negotiates, converted (Table,
// PartialObjectMetadata) when the client asks for that and convert is given. When nothing is
// acceptable, a success becomes a 406 and an error is written anyway, as raw indented JSON.
//
// Mirrors handlers.transformResponseObject and responsewriters.WriteObjectNegotiated.
func (s *Server) writeObjectFor(w http.ResponseWriter, req *http.Request, ep endpoint, code int, obj runtime.Object,
	convert func(runtime.Object, negotiated) (runtime.Object, error)) {
	n, err := ep.negotiateOutput(req, false)
	if err != nil {
		if code < http.StatusOK || code >= http.StatusBadRequest {
			writeRawJSON(w, code, obj)
			return
		}
		status := errorToAPIStatus(err)
		writeRawJSON(w, int(status.Code), status)
		return
	}
	if _, isStatus := obj.(*metav1.Status); n.convert != nil && !isStatus {
		if convert == nil {
			s.writeErrorFor(w, req, ep, ep.notAcceptable(false))
			return
		}
		if obj, err = convert(obj, n); err != nil {
			s.writeErrorFor(w, req, ep, err)
			return
		}
	}
	s.writeEncoded(w, req, code, n, obj)
}

// writeEncoded encodes obj in the negotiated format (JSON indented for pretty-print clients),
// gzip-compressed when the client accepts it and the body is over 128 KiB.
//
// Mirrors responsewriters.SerializeObject.
func (s *Server) writeEncoded(w http.ResponseWriter, req *http.Request, code int, n negotiated, obj runtime.Object) {
	var buf bytes.Buffer
	err := encodeAs(n.format, obj, n.pretty, &buf)
	data := buf.Bytes()
	mediaType := n.format.mediaType
	if err != nil {
		// The error's Status in the same format, else as text.
		status := errorToAPIStatus(err)
		if code >= http.StatusOK && code < http.StatusBadRequest {
			code = int(status.Code)
		}
		buf.Reset()
		if err := encodeAs(n.format, status, n.pretty, &buf); err == nil {
			data = buf.Bytes()
		} else {
			data, mediaType = []byte(fmt.Sprintf("%s: %s", status.Reason, status.Message)), "text/plain"
		}
	}
	h := w.Header()
	h.Set("Content-Type", mediaType)
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
