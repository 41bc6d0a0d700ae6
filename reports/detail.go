package reports

import "encoding/json"

// Detail is the account of a verdict that a test stores with it
// (flow.Decision.Detail, flow.Detailed) and every reply renders: the
// statistics' judgement, or the failure of a stage.
type Detail struct {
	Judgement *Judgement     `json:"judgement,omitempty"`
	Apply     *ApplyFailure  `json:"apply,omitempty"`
	Build     *BuildFailure  `json:"build,omitempty"`
	Unchanged *UnchangedCode `json:"unchanged,omitempty"`
}

// UnchangedCode is a PASS without a boot: the series changes only C
// files, and each compiles, with and without it, to the same object in
// the lab kernel's configuration. The kernel is the base's, so there is
// nothing to boot or compare.
type UnchangedCode struct {
	Objects []string `json:"objects"`
}

// Failure is a stage error that carries its account (flow.Detailed): a
// patch that does not apply, a kernel that does not build.
type Failure struct {
	Err     error
	Account Detail
}

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// Detail is the account as JSON; nil when it cannot be written.
func (f *Failure) Detail() json.RawMessage {
	b, err := json.Marshal(f.Account)
	if err != nil {
		return nil
	}
	return b
}
