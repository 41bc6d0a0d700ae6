package flow

import (
	"encoding/json"
	"errors"
)

// IsInfra says whether err is the infrastructure's fault: a stage's typed
// error implementing Infra() bool, anywhere in the chain. Only those are
// retried; any other stage error is a verdict on the patch.
func IsInfra(err error) bool {
	var ie interface{ Infra() bool }
	return errors.As(err, &ie) && ie.Infra()
}

// InfraError marks the bot's own failures (database, artifact store) as
// infrastructure, so they are retried like a lab outage.
type InfraError struct{ Err error }

func (e *InfraError) Error() string { return e.Err.Error() }
func (e *InfraError) Unwrap() error { return e.Err }
func (e *InfraError) Infra() bool   { return true }

// MarkInfra marks err as the infrastructure's fault, unless it says so
// already; nil stays nil.
func MarkInfra(err error) error {
	if err == nil || IsInfra(err) {
		return err
	}
	return &InfraError{err}
}

// Detailed is a stage error that describes itself for the reply (JSON:
// the patch that does not apply and where, the compiler's diagnostics).
// The bot stores the detail with the test and hands it back in
// Report.Detail; it never reads it.
type Detailed interface {
	error
	Detail() json.RawMessage
}
