package glm5rt

/*
#include <glm5rt/glm5rt.h>
*/
import "C"

import (
	"fmt"
	"runtime"
)

// Status is a status code of glm5rt.h (the numbers are pinned by the ABI).
type Status int32

const (
	StatusOK              Status = C.GLM5RT_OK
	StatusInvalidArgument Status = C.GLM5RT_ERR_INVALID_ARGUMENT
	StatusUnsupported     Status = C.GLM5RT_ERR_UNSUPPORTED
	StatusIO              Status = C.GLM5RT_ERR_IO
	StatusFormat          Status = C.GLM5RT_ERR_FORMAT
	StatusOutOfMemory     Status = C.GLM5RT_ERR_OUT_OF_MEMORY
	StatusCacheFull       Status = C.GLM5RT_ERR_CACHE_FULL
	StatusCancelled       Status = C.GLM5RT_ERR_CANCELLED
	StatusDevice          Status = C.GLM5RT_ERR_DEVICE
	StatusNoDevice        Status = C.GLM5RT_ERR_NO_DEVICE
	StatusMismatch        Status = C.GLM5RT_ERR_MISMATCH
	StatusBufferTooSmall  Status = C.GLM5RT_ERR_BUFFER_TOO_SMALL
	StatusNotFound        Status = C.GLM5RT_ERR_NOT_FOUND
	StatusState           Status = C.GLM5RT_ERR_STATE
	StatusInternal        Status = C.GLM5RT_ERR_INTERNAL
)

// String is the library's short description ("cache full").
func (s Status) String() string { return C.GoString(C.glm5rt_status_string(C.glm5rt_status(s))) }

// Error is a failed call: its status and the library's message.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "glm5rt: " + e.Status.String()
	}
	return fmt.Sprintf("glm5rt: %s (%s)", e.Message, e.Status)
}

// Is makes errors.Is(err, glm5rt.ErrCancelled) match any error of that status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status
}

// Sentinels for errors.Is.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrUnsupported     = &Error{Status: StatusUnsupported}
	ErrIO              = &Error{Status: StatusIO}
	ErrFormat          = &Error{Status: StatusFormat}
	ErrCacheFull       = &Error{Status: StatusCacheFull}
	ErrCancelled       = &Error{Status: StatusCancelled}
	ErrNoDevice        = &Error{Status: StatusNoDevice}
	ErrMismatch        = &Error{Status: StatusMismatch}
	ErrNotFound        = &Error{Status: StatusNotFound}
	ErrState           = &Error{Status: StatusState}
)

// call runs f (one or more C calls) with the goroutine locked to its OS thread, so that the
// thread-local glm5rt_last_error() read after a failure is the message of that failure: without the
// lock the goroutine could resume on another thread between the two cgo calls.
func call(f func() C.glm5rt_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := f(); st != C.GLM5RT_OK {
		return &Error{Status: Status(st), Message: C.GoString(C.glm5rt_last_error())}
	}
	return nil
}

func errClosed(what string) error {
	return &Error{Status: StatusState, Message: what + " is closed"}
}
