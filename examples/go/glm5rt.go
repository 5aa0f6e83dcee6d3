// Package glm5rt is the Go binding of libglm5rt, an embeddable runtime for GLM-5 models, over its C ABI
// (glm5rt.h), linked through pkg-config:
//
//	export PKG_CONFIG_PATH=PREFIX/lib/pkgconfig   # where `cmake --install` put glm5rt.pc
//	go test ./...
//
// Thread rules follow glm5rt.h: a Model and a Tokenizer may be used by any number of goroutines; a
// Session (and a DetokStream) by one goroutine at a time, except Session.Cancel, which any goroutine may
// call. Every handle has an idempotent Close; a finalizer frees handles that were never closed.
// Failures are *Error values carrying the Status and the library's message.
package glm5rt

/*
#cgo pkg-config: glm5rt
#include <glm5rt/glm5rt.h>
*/
import "C"

// Version is the loaded library's version string, e.g. "0.1.0".
func Version() string { return C.GoString(C.glm5rt_version()) }

// ABIVersion is the loaded library's ABI major version.
func ABIVersion() int { return int(C.glm5rt_abi_version()) }

// HeaderABIVersion is the ABI major version of the glm5rt.h this package was compiled against.
const HeaderABIVersion = int(C.GLM5RT_ABI_VERSION)
