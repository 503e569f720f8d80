package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// runAsListwatch makes the test binary act as the listwatch command, so tests can run the real
// main (flags, signals, exit status) as a child process without building it separately.
const runAsListwatch = "LISTWATCH_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsListwatch) == "1" {
		main()
	}
	goleak.VerifyTestMain(m)
}

func TestRunDispatch(t *testing.T) {
	cases := []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{nil, 2, "", "usage: listwatch <command>"},
		{[]string{"help"}, 0, "serve ", ""},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{[]string{"serve", "-h"}, 0, "", "-etcd-listen address"},
		{[]string{"serve", "--no-such-flag"}, 2, "", "flag provided but not defined: -no-such-flag"},
		{[]string{"serve", "extra"}, 2, "", `listwatch serve: unexpected argument "extra"`},
		{[]string{"serve", "--event-ttl", "-1m"}, 2, "", "listwatch serve: --event-ttl -1m0s: negative"},
		{[]string{"serve", "--event-ttl", "soon"}, 2, "", `invalid value "soon" for flag -event-ttl`},
		{[]string{"serve", "--etcd-listen", "0.0.0.0:0"}, 2, "", "--etcd-listen 0.0.0.0:0 would listen on 0.0.0.0, which is not loopback"},
		{[]string{"serve", "--etcd-listen", ":2379"}, 2, "", "would listen on every interface"},
		{[]string{"serve", "--etcd-listen", "nohostport"}, 2, "", `--etcd-listen "nohostport": address nohostport: missing port in address`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String(), c.out) || !strings.Contains(stderr.String(), c.errOut) {
			t.Errorf("listwatch %q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				c.args, code, stdout.String(), stderr.String(), c.code, c.out, c.errOut)
		}
	}
}
