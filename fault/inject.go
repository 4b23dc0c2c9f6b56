package fault

import (
	"errors"
	"fmt"
)

// ErrInjected marks every error produced by an armed failpoint, so tests can
// tell an injected failure from a real one with errors.Is.
var ErrInjected = errors.New("fault: injected")

// Injected is the error returned by Inject when a failpoint fires.
type Injected struct {
	Name  string // failpoint name
	Value any    // the value its terms returned, e.g. "eio"
}

func (e *Injected) Error() string { return fmt.Sprintf("fault: injected at %s (%v)", e.Name, e.Value) }

// Is makes errors.Is(err, ErrInjected) true.
func (e *Injected) Is(target error) bool { return target == ErrInjected }

// Inject returns a non-nil *Injected error when the named failpoint fires, and
// nil otherwise. It is the form used at durable steps: the caller treats the
// error exactly like the I/O error it stands for. A failpoint armed with
// `panic` panics inside Eval instead, which in a child process is a crash.
func Inject(name string) error {
	v, ok := Eval(name)
	if !ok {
		return nil
	}
	return &Injected{Name: name, Value: v}
}
