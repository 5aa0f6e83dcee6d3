package glm5rt

/*
#include <stdint.h>
#include <glm5rt/glm5rt.h>
glm5rt_status glm5rtgo_model_load(const char* dir, int32_t backend, int32_t device_index, int32_t n_threads,
                                  uintptr_t progress_handle, glm5rt_model** out_model);
void glm5rtgo_set_log_callback(uintptr_t handle);
*/
import "C"

import (
	"runtime/cgo"
	"sync"
)

// progressState is what a load's progress handle refers to. A panic in the callback is caught here
// (it must not unwind through the library's C++ frames) and re-raised once the load has returned.
type progressState struct {
	fn       func(fraction float32) bool
	panicked interface{}
}

//export goProgress
func goProgress(fraction C.float, handle C.uintptr_t) (keepGoing C.int32_t) {
	state := cgo.Handle(handle).Value().(*progressState)
	defer func() {
		if r := recover(); r != nil {
			state.panicked = r
			keepGoing = 0 // cancel the load
		}
	}()
	if state.fn(float32(fraction)) {
		return 1
	}
	return 0
}

// LogLevel is the level of a library log line.
type LogLevel int32

const (
	LogError LogLevel = C.GLM5RT_LOG_ERROR
	LogWarn  LogLevel = C.GLM5RT_LOG_WARN
	LogInfo  LogLevel = C.GLM5RT_LOG_INFO
	LogDebug LogLevel = C.GLM5RT_LOG_DEBUG
)

var (
	logMu     sync.Mutex
	logHandle cgo.Handle // 0 when no Go sink is installed
)

//export goLog
func goLog(level C.int32_t, line *C.char, handle C.uintptr_t) {
	defer func() { _ = recover() }() // logging is best effort; never unwind into C
	fn := cgo.Handle(handle).Value().(func(LogLevel, string))
	fn(LogLevel(level), C.GoString(line))
}

// SetLogCallback sends the library's log lines (whole lines, one call at a time, on whichever thread
// logs) to fn; nil restores the default (warnings and errors to stderr).
func SetLogCallback(fn func(level LogLevel, line string)) {
	logMu.Lock()
	defer logMu.Unlock()
	var h cgo.Handle
	if fn != nil {
		h = cgo.NewHandle(fn)
	}
	C.glm5rtgo_set_log_callback(C.uintptr_t(h))
	// The library swaps sinks under the lock its log calls hold: no call of the old sink is running.
	if logHandle != 0 {
		logHandle.Delete()
	}
	logHandle = h
}

// SetLogLevel drops lines above level (default LogWarn).
func SetLogLevel(level LogLevel) { C.glm5rt_set_log_level(C.int32_t(level)) }
