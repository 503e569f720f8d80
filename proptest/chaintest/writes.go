package chaintest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// do sends one request to the API and reads the whole answer.
func (c *Chain) do(method, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return resp.StatusCode, data, nil
}

func podPath(ns, name string) string {
	p := "/api/v1/namespaces/" + ns + "/pods"
	if name != "" {
		p += "/" + name
	}
	return p
}

// answerRV checks a write answer and returns the resourceVersion of the object it carries.
func answerRV(method, path string, code, want int, body []byte) (int64, error) {
	if code != want {
		return 0, fmt.Errorf("%s %s: HTTP %d, want %d: %s", method, path, code, want, body)
	}
	var obj struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return 0, fmt.Errorf("%s %s: answer is not an object: %v: %s", method, path, err, body)
	}
	return strconv.ParseInt(obj.Metadata.ResourceVersion, 10, 64)
}

// CreatePod POSTs a pod and returns the resourceVersion of the answer.
func (c *Chain) CreatePod(p Pod) (int64, error) {
	path := podPath(p.Namespace, "")
	code, body, err := c.do(http.MethodPost, path, p.JSON(""))
	if err != nil {
		return 0, err
	}
	return answerRV(http.MethodPost, path, code, http.StatusCreated, body)
}

// UpdatePod PUTs a pod with resourceVersion as its precondition and returns the answer's.
func (c *Chain) UpdatePod(p Pod, resourceVersion int64) (int64, error) {
	path := podPath(p.Namespace, p.Name)
	code, body, err := c.do(http.MethodPut, path, p.JSON(strconv.FormatInt(resourceVersion, 10)))
	if err != nil {
		return 0, err
	}
	return answerRV(http.MethodPut, path, code, http.StatusOK, body)
}

// DeletePod DELETEs a pod.
func (c *Chain) DeletePod(ns, name string) error {
	path := podPath(ns, name)
	code, body, err := c.do(http.MethodDelete, path, nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("DELETE %s: HTTP %d: %s", path, code, body)
	}
	return nil
}

// ListRV lists pods with resourceVersion=0 (from the watch cache) and returns the list's
// resourceVersion.
func (c *Chain) ListRV() (int64, error) {
	path := "/api/v1/pods?resourceVersion=0&limit=1"
	code, body, err := c.do(http.MethodGet, path, nil)
	if err != nil {
		return 0, err
	}
	return answerRV(http.MethodGet, path, code, http.StatusOK, body)
}

// PutRaw writes a value straight into the store, as another etcd client would.
func (c *Chain) PutRaw(key string, value []byte) (int64, error) {
	resp, err := c.Store.Put(&store.PutRequest{Key: []byte(key), Value: value})
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// DeleteRaw deletes a key straight from the store.
func (c *Chain) DeleteRaw(key string) (int64, error) {
	resp, err := c.Store.DeleteRange(&store.DeleteRangeRequest{Key: []byte(key)})
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// SyncCache brings the watch cache up to etcd's current revision and returns the cache's revision
// then. It lists consistently (no resourceVersion), for which the Cacher requests progress
// notifications every 100 ms of its clock until its revision reaches etcd's; the Cacher's clock
// steps while the list waits. Once the cache is at R, a compaction at R+1 or below cannot end the
// reflector's watch: that watch has delivered up to R (or started there).
func (c *Chain) SyncCache() (int64, error) {
	if c.Cacher == nil {
		return 0, errors.New("SyncCache: the chain has no watch cache")
	}
	type answer struct {
		code int
		body []byte
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		code, body, err := c.do(http.MethodGet, "/api/v1/pods", nil)
		answered <- answer{code, body, err}
	}()
	var a answer
	err := testutil.Poll("a consistent list", func() bool {
		select {
		case a = <-answered:
			return true
		default:
			return false
		}
	}, func() { c.CacheClock.Step(5 * time.Millisecond) })
	if err != nil {
		<-answered // do gives up at testutil.WaitTimeout too
		return 0, err
	}
	if a.err != nil {
		return 0, a.err
	}
	if _, err := answerRV(http.MethodGet, "/api/v1/pods", a.code, http.StatusOK, a.body); err != nil {
		return 0, err
	}
	return c.ListRV()
}
