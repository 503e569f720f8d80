package goapi

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// client-go and controller-runtime log through klog and logr; the tests read what they need
	// from the API instead.
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}
