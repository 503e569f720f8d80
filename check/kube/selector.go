package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// selector is a request's label and field selectors, evaluated as the apiserver's
// storage.SelectionPredicate does (k8s.io/apiserver pkg/storage/selection_predicate.go Matches)
// over the fields every resource has (pkg/registry/generic DefaultNamespaceScopedAttr):
// metadata.name and metadata.namespace.
type selector struct {
	label     labels.Selector
	field     fields.Selector
	namespace string
}

// newSelector parses o's selectors; the error is the apiserver's 400 reason.
func newSelector(o *ListOptions, namespace string) (*selector, error) {
	s := &selector{label: labels.Everything(), field: fields.Everything(), namespace: namespace}
	if o == nil {
		return s, nil
	}
	var err error
	if o.LabelSelector != "" {
		if s.label, err = labels.Parse(o.LabelSelector); err != nil {
			return nil, fmt.Errorf("labelSelector %q: %v", o.LabelSelector, err)
		}
	}
	if o.FieldSelector != "" {
		if s.field, err = fields.ParseSelector(o.FieldSelector); err != nil {
			return nil, fmt.Errorf("fieldSelector %q: %v", o.FieldSelector, err)
		}
	}
	return s, nil
}

// matches reports whether the selectors admit obj; nil admits everything.
func (s *selector) matches(obj *Object) bool {
	if s == nil {
		return true
	}
	return s.label.Matches(labels.Set(obj.Labels)) &&
		s.field.Matches(fields.Set{"metadata.name": obj.Name, "metadata.namespace": s.namespace})
}

// hasSelector reports whether o selects by label or field.
func hasSelector(o *ListOptions) bool { return o.LabelSelector != "" || o.FieldSelector != "" }
