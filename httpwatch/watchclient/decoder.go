package watchclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// ErrInvalidFrame is wrapped by every Decoder error about a frame that is not a watch event.
var ErrInvalidFrame = errors.New("invalid watch frame")

// Frame is one event of a JSON watch stream as the wire carries it.
type Frame struct {
	// Type is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
	Type watch.EventType
	// Object is the event object's JSON, a Status for ERROR.
	Object json.RawMessage
}

// Status decodes the object of an ERROR frame.
func (f Frame) Status() (*metav1.Status, error) {
	if f.Type != watch.Error {
		return nil, fmt.Errorf("%w: a %s frame carries no Status", ErrInvalidFrame, f.Type)
	}
	var s metav1.Status
	if err := json.Unmarshal(f.Object, &s); err != nil {
		return nil, fmt.Errorf("%w: ERROR object: %v", ErrInvalidFrame, err)
	}
	if s.Kind != "Status" {
		return nil, fmt.Errorf("%w: ERROR object of kind %q, want Status", ErrInvalidFrame, s.Kind)
	}
	return &s, nil
}

// Meta decodes the kind and metadata of the frame's object.
func (f Frame) Meta() (metav1.TypeMeta, metav1.ObjectMeta, error) {
	var o struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(f.Object, &o); err != nil {
		return metav1.TypeMeta{}, metav1.ObjectMeta{}, fmt.Errorf("%w: object metadata: %v", ErrInvalidFrame, err)
	}
	return o.TypeMeta, o.Metadata, nil
}

// Decoder reads the frames of a JSON watch stream (a plain HTTP watch body, or the concatenated
// messages of a websocket watch), as client-go's watch decoder does: each frame is a JSON object with
// a known event type and an object that is itself a JSON object. Whitespace between frames is
// allowed; anything else is an error wrapping ErrInvalidFrame.
type Decoder struct {
	dec *json.Decoder
	err error
}

// NewDecoder returns a Decoder reading r.
func NewDecoder(r io.Reader) *Decoder { return &Decoder{dec: json.NewDecoder(r)} }

// Decode returns the next frame. It returns io.EOF when the stream ends cleanly between frames and
// io.ErrUnexpectedEOF when it ends inside one; after an error every call returns the same error.
func (d *Decoder) Decode() (Frame, error) {
	if d.err != nil {
		return Frame{}, d.err
	}
	f, err := d.decode()
	if err != nil {
		d.err = err
	}
	return f, err
}

func (d *Decoder) decode() (Frame, error) {
	var raw json.RawMessage
	if err := d.dec.Decode(&raw); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return Frame{}, err
		}
		return Frame{}, fmt.Errorf("%w: %v", ErrInvalidFrame, err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return Frame{}, fmt.Errorf("%w: not a JSON object", ErrInvalidFrame)
	}
	var ev struct {
		Type   *string          `json:"type"`
		Object *json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrInvalidFrame, err)
	}
	if ev.Type == nil {
		return Frame{}, fmt.Errorf("%w: no type", ErrInvalidFrame)
	}
	switch t := watch.EventType(*ev.Type); t {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error:
	default:
		return Frame{}, fmt.Errorf("%w: got invalid watch event type: %v", ErrInvalidFrame, *ev.Type)
	}
	if ev.Object == nil {
		return Frame{}, fmt.Errorf("%w: no object", ErrInvalidFrame)
	}
	obj := bytes.TrimSpace(*ev.Object)
	if len(obj) == 0 || obj[0] != '{' {
		return Frame{}, fmt.Errorf("%w: the object is not a JSON object", ErrInvalidFrame)
	}
	return Frame{Type: watch.EventType(*ev.Type), Object: json.RawMessage(obj)}, nil
}

// AppendFrame appends the wire form of a frame to dst: {"type":…,"object":…} and a newline, as the
// server writes it. object must be compact JSON.
func AppendFrame(dst []byte, typ watch.EventType, object []byte) []byte {
	t, _ := json.Marshal(string(typ))
	dst = append(dst, `{"type":`...)
	dst = append(dst, t...)
	dst = append(dst, `,"object":`...)
	dst = append(dst, object...)
	return append(dst, "}\n"...)
}
