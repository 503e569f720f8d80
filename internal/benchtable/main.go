package main

import (
	"fmt"
	"os"
)

func main() {
	r, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	write(os.Stdout, tableRows(), r)
}
