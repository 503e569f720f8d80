package storage

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
)

// The continue token errors, as storage's.
var (
	ErrInvalidStartRV             = errors.New("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	ErrEmptyStartKey              = errors.New("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
	ErrGenericInvalidKey          = errors.New("continue key is not valid")
	ErrUnrecognizedEncodedVersion = errors.New("continue key is not valid: server does not recognize this encoded version")
)

// continueToken is the apiserver's public continue format: base64url(JSON) without padding.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

// DecodeContinue returns the etcd key to resume from and the revision the list is pinned to (-1: the
// latest). The start key is cleaned so that it can never escape keyPrefix.
//
// Mirrors storage/continue.go DecodeContinue.
func DecodeContinue(continueValue, keyPrefix string) (fromKey string, rv int64, err error) {
	data, err := base64.RawURLEncoding.DecodeString(continueValue)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrGenericInvalidKey, err)
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrGenericInvalidKey, err)
	}
	if c.APIVersion != "meta.k8s.io/v1" {
		return "", 0, fmt.Errorf("%w %v", ErrUnrecognizedEncodedVersion, c.APIVersion)
	}
	if c.ResourceVersion == 0 {
		return "", 0, ErrInvalidStartRV
	}
	if len(c.StartKey) == 0 {
		return "", 0, ErrEmptyStartKey
	}
	key := c.StartKey
	if !strings.HasPrefix(key, "/") {
		key = "/" + key
	}
	if cleaned := path.Clean(key); cleaned != key {
		return "", 0, fmt.Errorf("%w: %v", ErrGenericInvalidKey, c.StartKey)
	}
	return keyPrefix + key[1:], c.ResourceVersion, nil
}

// EncodeContinue encodes the position key (relative to keyPrefix) and the pinned revision.
//
// Mirrors storage/continue.go EncodeContinue.
func EncodeContinue(key, keyPrefix string, resourceVersion int64) (string, error) {
	next := strings.TrimPrefix(key, keyPrefix)
	if next == key {
		return "", fmt.Errorf("unable to encode next field: the key and key prefix do not match")
	}
	out, err := json.Marshal(&continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: resourceVersion, StartKey: next})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// PrepareContinueToken returns the continue token after keyLastItem and, for an unfiltered list, the
// number of items left. The watch cache pages its lists with it too.
//
// Mirrors storage/continue.go PrepareContinueToken.
func PrepareContinueToken(keyLastItem, keyPrefix string, resourceVersion, itemsCount int64, hasMoreItems bool, opts ListOptions) (string, *int64, error) {
	if !hasMoreItems {
		return "", nil, nil
	}
	token, err := EncodeContinue(keyLastItem+"\x00", keyPrefix, resourceVersion)
	if err != nil {
		return "", nil, err
	}
	var remaining *int64
	// etcd counts objects the predicate drops, so a count is only given for an unfiltered list.
	if opts.Predicate.Empty() {
		n := itemsCount - opts.Predicate.Limit
		remaining = &n
	}
	return token, remaining, nil
}
