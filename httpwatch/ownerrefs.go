package httpwatch

import (
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The warnings of handlers.dedupOwnerReferencesAndAddWarning: before admission (creates, updates)
// and after it (patches).
const (
	duplicateOwnerReferencesWarning = ".metadata.ownerReferences contains duplicate entries; API server dedups owner " +
		"references in 1.20+, and may reject such requests as early as 1.24; please fix your requests; duplicate UID(s) observed: %v"
	duplicateOwnerReferencesAfterAdmissionWarning = ".metadata.ownerReferences contains duplicate entries after mutating " +
		"admission happens; API server dedups owner references in 1.20+, and may reject such requests as early as 1.24; " +
		"please fix your requests; duplicate UID(s) observed: %v"
)

// dedupOwnerReferences drops the owner references of obj equal to an earlier one and warns of
// their uids, as the write handlers do before storing an object.
//
// Mirrors handlers.dedupOwnerReferencesAndAddWarning (rest.go).
func dedupOwnerReferences(w http.ResponseWriter, obj *unstructured.Unstructured, afterAdmission bool) {
	refs := obj.GetOwnerReferences()
	var kept []metav1.OwnerReference
	var duplicates []string
	seen := map[string]bool{}
	for _, ref := range refs {
		if seen[string(ref.UID)] && hasOwnerReference(kept, ref) {
			duplicates = append(duplicates, string(ref.UID))
			continue
		}
		seen[string(ref.UID)] = true
		kept = append(kept, ref)
	}
	if len(duplicates) == 0 {
		return
	}
	format := duplicateOwnerReferencesWarning
	if afterAdmission {
		format = duplicateOwnerReferencesAfterAdmissionWarning
	}
	addWarningOnce(w, fmt.Sprintf(format, strings.Join(duplicates, ", ")))
	obj.SetOwnerReferences(kept)
}

func hasOwnerReference(refs []metav1.OwnerReference, ref metav1.OwnerReference) bool {
	for _, r := range refs {
		if equality.Semantic.DeepEqual(r, ref) {
			return true
		}
	}
	return false
}
