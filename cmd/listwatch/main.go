// Command listwatch runs the listwatch reference implementation.
//
// Usage:
//
//	listwatch <command> [flags]
//
// Each command lives in its own file and registers itself with register from an init function;
// this file only dispatches. `listwatch <command> -h` lists a command's flags.
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
	"syscall"
)

// command is one subcommand. run gets the arguments after the command name and a context that ends
// on SIGINT or SIGTERM; it returns a usageError for a bad command line.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the command winds down; a second one gets the default action and kills
	// the process.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a command and returns the process exit status: 0 on success, 1 when the command
// failed, 2 for a bad command line.
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
	default:
		fmt.Fprintf(stderr, "listwatch %s: %v\n", c.name, err)
		return 1
	}
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
