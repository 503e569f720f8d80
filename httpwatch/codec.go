package httpwatch

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/builtin"
)

// The encodings of objects. Objects of every resource are unstructured here and in storage; a
// built-in one becomes its k8s.io/api type only to be written or read as protobuf, as the
// apiserver's typed codecs would write and read it.

var (
	protobufOnce       sync.Once
	protobufSerializer *protobuf.Serializer
)

// protobufCodec is the apiserver's protobuf serializer over the built-in scheme: the "k8s\x00"
// magic and a runtime.Unknown envelope around the object.
func protobufCodec() *protobuf.Serializer {
	protobufOnce.Do(func() {
		s := builtin.Scheme()
		protobufSerializer = protobuf.NewSerializer(s, s)
	})
	return protobufSerializer
}

// encodeAs writes obj in format f; JSON is indented when pretty.
func encodeAs(f *format, obj runtime.Object, pretty bool, w *bytes.Buffer) error {
	switch f {
	case formatProtobuf:
		typed, err := protoObject(obj)
		if err != nil {
			return err
		}
		return protobufCodec().Encode(typed, w)
	case formatYAML:
		data, err := encodeJSON(obj)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(data)
		if err != nil {
			return err
		}
		w.Write(y)
		return nil
	default:
		data, err := encodeJSON(obj)
		if err != nil {
			return err
		}
		if pretty {
			return json.Indent(w, bytes.TrimSuffix(data, []byte("\n")), "", "  ")
		}
		w.Write(data)
		return nil
	}
}

// encodeJSON returns the JSON of obj followed by a newline, as json.Encoder writes it. Unstructured
// objects go through unstructured.UnstructuredJSONScheme, everything else through encoding/json. A
// Status always names its kind.
func encodeJSON(obj runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	switch t := obj.(type) {
	case runtime.CacheableObject:
		return encodeJSON(t.GetObject())
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

// protoObject returns the object protobuf can encode for obj: the typed form of an unstructured
// built-in object or list, or obj itself, its kind filled in from the scheme.
func protoObject(obj runtime.Object) (runtime.Object, error) {
	switch t := obj.(type) {
	case runtime.CacheableObject:
		return protoObject(t.GetObject())
	case *unstructured.Unstructured:
		if !builtin.Scheme().Recognizes(t.GroupVersionKind()) {
			// A custom resource: the protobuf serializer refuses it with its 406.
			return t, nil
		}
		return builtin.ToTyped(t.GroupVersionKind(), t.Object)
	case *unstructured.UnstructuredList:
		if !builtin.Scheme().Recognizes(t.GroupVersionKind()) {
			return t, nil
		}
		return builtin.ToTyped(t.GroupVersionKind(), t.UnstructuredContent())
	}
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		gvks, _, err := builtin.Scheme().ObjectKinds(obj)
		if err != nil {
			return nil, err
		}
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return obj, nil
}

// writeProtobufWatchFrame writes one event of a protobuf watch stream: the length of a
// metav1.WatchEvent, 4 bytes big-endian, then the event, whose object is the enveloped protobuf
// of obj.
//
// Mirrors handlers.watchEncoder over the protobuf raw serializer and the length-delimited framer.
func writeProtobufWatchFrame(typ string, obj runtime.Object, scratch *bytes.Buffer, lengthPrefix bool, w io.Writer) error {
	scratch.Reset()
	typed, err := protoObject(obj)
	if err != nil {
		return err
	}
	if err := protobufCodec().Encode(typed, scratch); err != nil {
		return err
	}
	event := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: scratch.Bytes()}}
	data := make([]byte, 4+event.Size())
	n, err := event.MarshalToSizedBuffer(data[4:])
	if err != nil {
		return err
	}
	if n != len(data)-4 {
		return fmt.Errorf("watch event encoded to %d bytes, expected %d", n, len(data)-4)
	}
	binary.BigEndian.PutUint32(data[:4], uint32(n))
	if !lengthPrefix {
		data = data[4:]
	}
	_, err = w.Write(data)
	return err
}
