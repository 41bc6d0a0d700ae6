package flow

import "encoding/json"

// Checked is what the quick check of a series found (the check lane
// compiles alone the files it changes, before its full build).
type Checked struct {
	// Compiled lists the objects made; empty when the check could not
	// stand for the full build (which then decides).
	Compiled []string
	// Unchanged says the series changes no generated code: every file it
	// changes compiled into Compiled alone, each byte for byte the
	// base's object, so its kernel is the base's.
	Unchanged bool
	// Detail is the reply's account of an Unchanged check
	// (Report.Detail).
	Detail json.RawMessage
}
