// Command listwatch runs the listwatch reference implementation.
//
// Usage:
//
//	listwatch <command> [flags]
//
// Each command lives in its own file and registers itself with register from an init function;
// this file only dispatches. `listwatch <command> -h` lists a command's flags.
//
// Exit status: 0 on success, 2 for a bad command line, 1 when a command failed, except where a
// command's error chooses its own (exitCoder): `listwatch check` exits 0 PASS, 1 FAIL, 2 could not
// run, 3 INCONCLUSIVE, 130 interrupted. The first SIGINT or SIGTERM ends the context a command runs
// with; for check (command.twoSignals) a second ends abortContext, and the next kills the process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
)

// command is one subcommand. run gets the arguments after the command name and a context that ends
// on SIGINT or SIGTERM; it returns a usageError for a bad command line, and an error with an
// ExitCode method for an exit status of its own.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// twoSignals: the command winds down on the first signal and stops at the second (abortContext
	// ends then); for the others the second signal kills the process.
	twoSignals bool
}

// exitCoder is an error that chooses the process's exit status.
type exitCoder interface {
	error
	ExitCode() int
}

// abortKey is the context key of the context a second signal ends.
type abortKey struct{}

// withAbort returns ctx carrying abort, the context that ends at a second SIGINT or SIGTERM.
func withAbort(ctx, abort context.Context) context.Context {
	return context.WithValue(ctx, abortKey{}, abort)
}

// abortContext is the context that ends at the second signal: the one withAbort put in ctx, or one
// that never ends.
func abortContext(ctx context.Context) context.Context {
	if a, ok := ctx.Value(abortKey{}).(context.Context); ok {
		return a
	}
	return context.Background()
}

var commands = map[string]*command{}

// register adds a subcommand; each command's file calls it from init.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("listwatch: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// usageError is a mistake in the command line: exit status 2. reported says the message was already
// printed (the flag package prints its own errors with the flag list).
type usageError struct {
	err      error
	reported bool
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	twoSignals := len(os.Args) > 1 && commands[os.Args[1]] != nil && commands[os.Args[1]].twoSignals
	ctx, abort, stop := notifySignals(twoSignals)
	code := run(withAbort(ctx, abort), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// notifySignals returns a context that ends at the first SIGINT or SIGTERM and, with twoSignals, one
// that ends at the second; the signal after the last one it handles gets the default action and
// kills the process. stop releases the signals and ends the goroutine that waits for them.
func notifySignals(twoSignals bool) (ctx, abort context.Context, stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	abort, cancelAbort := context.WithCancel(context.Background())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer signal.Stop(sigs)
		for _, end := range []context.CancelFunc{cancel, cancelAbort} {
			select {
			case <-sigs:
				end()
			case <-done:
				return
			}
			if !twoSignals {
				return
			}
		}
	})
	return ctx, abort, func() {
		close(done)
		wg.Wait()
		cancel()
		cancelAbort()
	}
}

// run dispatches to a command and returns the process exit status: 0 on success, 1 when the command
// failed, 2 for a bad command line, or the code of an error with an ExitCode method (check's).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "listwatch: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	err := c.run(ctx, args[1:], stdout, stderr)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		if !ue.reported {
			fmt.Fprintf(stderr, "listwatch %s: %v\n", c.name, err)
		}
		return 2
	}
	fmt.Fprintf(stderr, "listwatch %s: %v\n", c.name, err)
	if ec, ok := errors.AsType[exitCoder](err); ok {
		return ec.ExitCode()
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: listwatch <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'listwatch <command> -h' for a command's flags.")
}
