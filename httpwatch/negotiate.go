package httpwatch

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/munnerz/goautoneg"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Content negotiation, as k8s.io/apiserver pkg/endpoints/handlers/negotiation: which serialization a
// response uses (Accept), which one a body is in (Content-Type), and the conversions a client may
// ask for with the as, g and v parameters (Table, PartialObjectMetadata, aggregated discovery).

// format is one serialization the server speaks.
type format struct {
	mediaType string
	typ, sub  string
	// stream says the format has a watch framing.
	stream bool
}

const (
	contentTypeJSON     = "application/json"
	contentTypeYAML     = "application/yaml"
	contentTypeProtobuf = "application/vnd.kubernetes.protobuf"
)

var (
	formatJSON     = &format{mediaType: contentTypeJSON, typ: "application", sub: "json", stream: true}
	formatYAML     = &format{mediaType: contentTypeYAML, typ: "application", sub: "yaml"}
	formatProtobuf = &format{mediaType: contentTypeProtobuf, typ: "application", sub: "vnd.kubernetes.protobuf", stream: true}
)

// Conversions a client may ask for.
const (
	asTable                     = "Table"
	asPartialObjectMetadata     = "PartialObjectMetadata"
	asPartialObjectMetadataList = "PartialObjectMetadataList"
	asAPIGroupDiscoveryList     = "APIGroupDiscoveryList"
	discoveryGroup              = "apidiscovery.k8s.io"
)

// endpoint is what an endpoint can answer in: its formats, first the default, and the conversions
// it makes.
//
// Mirrors negotiation.EndpointRestrictions and RequestScope.AllowsMediaTypeTransform.
type endpoint struct {
	formats []*format
	// objects says the endpoint serves objects of a resource: Table and PartialObjectMetadata
	// conversions apply.
	objects bool
	// discovery says the endpoint is /api or /apis: the aggregated discovery document applies.
	discovery bool
	// standard, when set, are the formats that carry the endpoint's objects unconverted; the
	// others carry only conversions (and errors).
	standard []*format
}

// forErrors is what the endpoint's errors are answered in: any of its formats, unconverted.
//
// Mirrors negotiation.DefaultEndpointRestrictions, which responsewriters.ErrorNegotiated uses.
func (ep endpoint) forErrors() endpoint { return endpoint{formats: ep.formats} }

var (
	// typedEndpoint serves a built-in type: JSON, YAML and protobuf, as the apiserver's legacy codecs.
	typedEndpoint = endpoint{formats: []*format{formatJSON, formatYAML, formatProtobuf}, objects: true}
	// customEndpoint serves a custom resource: JSON, YAML and protobuf, as apiextensions-apiserver's
	// unstructuredNegotiatedSerializer (CBOR is behind a gate that is off), protobuf only for
	// PartialObjectMetadata and errors (the RequestScope's StandardSerializers).
	customEndpoint = endpoint{formats: []*format{formatJSON, formatYAML, formatProtobuf}, objects: true,
		standard: []*format{formatJSON, formatYAML}}
	// metaEndpoint serves discovery documents and other meta.k8s.io objects.
	metaEndpoint = endpoint{formats: []*format{formatJSON, formatYAML, formatProtobuf}}
	// rootDiscoveryEndpoint is /api and /apis.
	rootDiscoveryEndpoint = endpoint{formats: []*format{formatJSON, formatYAML, formatProtobuf}, discovery: true}
)

// negotiated is the outcome of negotiating a response.
type negotiated struct {
	format  *format
	pretty  bool
	convert *schema.GroupVersionKind
	// query is the request's query, where a Table conversion finds its TableOptions.
	query url.Values
}

// allowsTransform mirrors RequestScope.AllowsMediaTypeTransform (and the discovery handlers'
// restriction to APIGroupDiscoveryList).
func (ep endpoint) allowsTransform(f *format, target *schema.GroupVersionKind) bool {
	if target == nil {
		return ep.standard == nil || slices.Contains(ep.standard, f)
	}
	if ep.discovery && target.Group == discoveryGroup && (target.Version == "v2" || target.Version == "v2beta1") &&
		target.Kind == asAPIGroupDiscoveryList && f != formatYAML {
		return true
	}
	if !ep.objects {
		return false
	}
	if gv := target.GroupVersion(); gv != metav1.SchemeGroupVersion && gv != metav1beta1.SchemeGroupVersion {
		return false
	}
	switch target.Kind {
	case asTable:
		return f == formatJSON || f == formatYAML
	case asPartialObjectMetadata, asPartialObjectMetadataList:
		return true
	}
	return false
}

// acceptOptions mirrors negotiation.acceptMediaTypeOptions.
func (ep endpoint) acceptOptions(params map[string]string, f *format, stream bool) (negotiated, bool) {
	n := negotiated{format: f}
	for k, v := range params {
		switch k {
		case "as", "g", "v":
			if n.convert == nil {
				n.convert = &schema.GroupVersionKind{}
			}
			switch k {
			case "as":
				n.convert.Kind = v
			case "g":
				n.convert.Group = v
			default:
				n.convert.Version = v
			}
		case "stream":
			if v != "" && (!f.stream || v != "watch") {
				return negotiated{}, false
			}
		case "sv":
			if v != "" {
				return negotiated{}, false
			}
		case "pretty":
			n.pretty = v == "1"
		}
	}
	if stream && !f.stream {
		return negotiated{}, false
	}
	if !ep.allowsTransform(f, n.convert) {
		return negotiated{}, false
	}
	return n, true
}

// negotiate picks the response format for an Accept header; with stream, only formats with a watch
// framing qualify.
//
// Mirrors negotiation.NegotiateMediaTypeOptions.
func (ep endpoint) negotiate(accept string, stream bool) (negotiated, bool) {
	if accept == "" {
		return negotiated{format: ep.formats[0]}, true
	}
	for _, clause := range goautoneg.ParseAccept(accept) {
		for _, f := range ep.formats {
			if (clause.Type == f.typ && clause.SubType == f.sub) || (clause.Type == f.typ && clause.SubType == "*") ||
				(clause.Type == "*" && clause.SubType == "*") {
				if n, ok := ep.acceptOptions(clause.Params, f, stream); ok {
					return n, true
				}
			}
		}
	}
	return negotiated{}, false
}

// negotiateOutput is negotiate with the request's pretty-printing and the 406 the apiserver answers.
//
// Mirrors negotiation.NegotiateOutputMediaType and NegotiateOutputMediaTypeStream.
func (ep endpoint) negotiateOutput(req *http.Request, stream bool) (negotiated, error) {
	n, ok := ep.negotiate(req.Header.Get("Accept"), stream)
	if !ok {
		return n, ep.notAcceptable(stream)
	}
	n.pretty = n.pretty || isPrettyPrint(req)
	n.query = req.URL.Query()
	return n, nil
}

// mediaTypes lists the endpoint's media types, or their watch forms.
//
// Mirrors negotiation.MediaTypesForSerializer.
func (ep endpoint) mediaTypes(stream bool) []string {
	var out []string
	for _, f := range ep.formats {
		switch {
		case !stream:
			out = append(out, f.mediaType)
		case f.stream:
			out = append(out, f.mediaType+";stream=watch")
		}
	}
	return out
}

// inputFormat returns the format of a request body from its Content-Type: the endpoint's first
// format when there is none, a 415 listing the accepted ones when it is not one of them.
//
// Mirrors negotiation.NegotiateInputSerializerForMediaType.
func (ep endpoint) inputFormat(contentType string) (*format, error) {
	if contentType == "" {
		return ep.formats[0], nil
	}
	if mediaType, _, err := mime.ParseMediaType(contentType); err == nil {
		for _, f := range ep.formats {
			if f.mediaType == mediaType {
				return f, nil
			}
		}
	}
	return nil, unsupportedMediaType(ep.mediaTypes(false))
}

func (ep endpoint) notAcceptable(stream bool) error {
	return mediaTypeError{http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		"only the following media types are accepted: " + strings.Join(ep.mediaTypes(stream), ", ")}
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

func unsupportedMediaType(accepted []string) error {
	return mediaTypeError{http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		"the body of the request was in an unknown format - accepted media types include: " + strings.Join(accepted, ", ")}
}

// notAcceptableMessage mirrors handlers.errNotAcceptable: a conversion the object cannot make.
type notAcceptableMessage string

func (e notAcceptableMessage) Error() string { return string(e) }

func (e notAcceptableMessage) Status() metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable, Message: string(e)}
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

func (n negotiated) String() string {
	if n.convert != nil {
		return fmt.Sprintf("%s;as=%s;g=%s;v=%s", n.format.mediaType, n.convert.Kind, n.convert.Group, n.convert.Version)
	}
	return n.format.mediaType
}
