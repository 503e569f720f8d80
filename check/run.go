package check

import (
	"fmt"
	"time"
)

// SchemaVersion is the version of the history file format this build writes and reads. A file
// with another version is refused with ErrUnsupportedSchema, naming both.
const SchemaVersion = 2

// ErrUnsupportedSchema: a history file was written in a format this build cannot read.
var ErrUnsupportedSchema = fmt.Errorf("%w: unsupported schema version", ErrInvalidHistory)

// Run describes the run that recorded a history: everything a verdict depends on besides the
// history itself, so that checking the file again gives the same verdict. A recorder fills it;
// a checker reads the target's version (which decides whether a violation is a known upstream
// bug or a regression) and capabilities from it.
type Run struct {
	// Schema is the file format's version (SchemaVersion when written by this build).
	Schema int `json:"schema"`
	// Tool is the version of the program that recorded the history ("listwatch (devel)").
	Tool string `json:"tool,omitempty"`
	// Target names what was checked: endpoints or a URL, "in-memory store" for the built-in one.
	Target string `json:"target,omitempty"`
	// Store is the kind of store the target says it is ("etcd", "kine", "listwatch", "kube-apiserver").
	Store string `json:"store,omitempty"`
	// Version is the target's version as it reports it ("3.4.23"); empty when it reports none.
	Version string `json:"version,omitempty"`
	// Capabilities lists the parts of the API the target refused or answered otherwise than etcd
	// (the probe's findings by name), which the workload then did without.
	Capabilities []string `json:"capabilities,omitempty"`
	// Workload is the workload's name ("k8s", "etcd"; empty for a history submitted by hand).
	Workload string `json:"workload,omitempty"`
	// Seed is the workload's seed.
	Seed int64 `json:"seed,omitempty"`
	// Flags are the command-line flags of the run, as given.
	Flags []string `json:"flags,omitempty"`
	// Started is when recording began.
	Started time.Time `json:"started,omitzero"`
	// Interrupted is set when recording was stopped early (by SIGINT): the history is what was
	// recorded until then.
	Interrupted bool `json:"interrupted,omitempty"`
}

// CheckSchema returns nil when a file's schema version can be read by this build, and an error
// wrapping ErrUnsupportedSchema that names both versions otherwise.
func CheckSchema(got int) error {
	if got == SchemaVersion {
		return nil
	}
	return fmt.Errorf("%w %d (this build reads version %d; record the history again or use the listwatch that wrote it)",
		ErrUnsupportedSchema, got, SchemaVersion)
}
