package target

import "errors"

// Sentinel errors. Resolve and Refresh wrap them so that callers can tell the
// cases apart with errors.Is while the message says what happened and what to
// do about it.
var (
	// ErrInvalidSpec: the Spec asks for nothing, for more than one target, or
	// has a malformed field (e.g. a pod not written NAMESPACE/NAME).
	ErrInvalidSpec = errors.New("invalid target")

	// ErrNotFound: the process, cgroup, command, pod or container named by
	// the Spec does not exist (in /proc, in the cgroup filesystems, in PATH,
	// in the API server, or on this node).
	ErrNotFound = errors.New("not found")

	// ErrNothingMatched: the target exists but holds no process, e.g. an
	// empty cgroup. Tracing it would record nothing.
	ErrNothingMatched = errors.New("nothing matched")

	// ErrWrongNode: the pod is not scheduled to this node, so its processes
	// cannot be traced here.
	ErrWrongNode = errors.New("pod is not on this node")

	// ErrForbidden: the API server refused the request for lack of RBAC
	// permission.
	ErrForbidden = errors.New("forbidden")

	// ErrUnauthorized: the API server did not accept the credentials.
	ErrUnauthorized = errors.New("unauthorized")
)

// kindError is an error whose message is written for the user in full, that
// matches one of the sentinels above with errors.Is, and that keeps its cause
// (e.g. a Kubernetes API status error) reachable with errors.As. Wrapping with
// fmt.Errorf("...: %w", ErrX) instead would end every message with the
// sentinel's bare text.
type kindError struct {
	kind  error
	msg   string
	cause error
}

func (e *kindError) Error() string {
	if e.cause != nil {
		return e.msg + ": " + e.cause.Error()
	}
	return e.msg
}

func (e *kindError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}

// newError returns a kindError of the given kind; cause may be nil.
func newError(kind, cause error, msg string) error {
	return &kindError{kind: kind, msg: msg, cause: cause}
}
