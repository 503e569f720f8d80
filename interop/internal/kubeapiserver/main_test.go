package kubeapiserver

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// The upstream server logs its life through klog (process-wide): start-up, controllers,
	// shutdown. The tests say what failed.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m, GoleakOptions()...)
}
