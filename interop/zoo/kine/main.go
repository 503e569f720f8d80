// Command kine is kine's own server command (its pkg/app) at the version its -modfile requires,
// built for listwatch's zoo (interop/zoo): the driver starts it with kine's flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/k3s-io/kine/pkg/app"
)

func main() {
	if err := app.New().Run(os.Args); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "kine:", err)
		os.Exit(1)
	}
}
