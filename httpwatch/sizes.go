package httpwatch

import (
	"encoding/base64"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxDataSize is core.MaxSecretSize, the bound of a ConfigMap's or Secret's data (1 MiB).
const maxDataSize = 1 * 1024 * 1024

// validateConfigMapSize mirrors the size check of validation.ValidateConfigMap: data and
// binaryData together may hold at most 1 MiB, reported against the whole object.
func validateConfigMapSize(obj, _ map[string]any) field.ErrorList {
	total := dataSize(obj, "data", false) + dataSize(obj, "binaryData", true)
	if total > maxDataSize {
		return field.ErrorList{field.TooLong(field.NewPath(""), "", maxDataSize)}
	}
	return nil
}

// validateSecretSize mirrors the size check of validation.ValidateSecret: the data (stringData
// merged in, as the conversion to the internal type merges it) may hold at most 1 MiB.
func validateSecretSize(obj, _ map[string]any) field.ErrorList {
	sizes := map[string]int{}
	if m, ok := obj["data"].(map[string]any); ok {
		for k, v := range m {
			sizes[k] = valueSize(v, true)
		}
	}
	if m, ok := obj["stringData"].(map[string]any); ok {
		for k, v := range m {
			sizes[k] = valueSize(v, false)
		}
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total > maxDataSize {
		return field.ErrorList{field.TooLong(field.NewPath("data"), "", maxDataSize)}
	}
	return nil
}

// dataSize is the size in bytes of the values of a string map, base64-decoded if encoded.
func dataSize(obj map[string]any, name string, encoded bool) int {
	m, _ := obj[name].(map[string]any)
	total := 0
	for _, v := range m {
		total += valueSize(v, encoded)
	}
	return total
}

func valueSize(v any, encoded bool) int {
	s, _ := v.(string)
	if !encoded {
		return len(s)
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return len(b)
	}
	return base64.StdEncoding.DecodedLen(len(s))
}
