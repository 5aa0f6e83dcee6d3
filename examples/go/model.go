package glm5rt

/*
#include <stdint.h>
#include <stdlib.h>
#include <glm5rt/glm5rt.h>
glm5rt_status glm5rtgo_model_load(const char* dir, int32_t backend, int32_t device_index, int32_t n_threads,
                                  uintptr_t progress_handle, glm5rt_model** out_model);
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sync"
	"unsafe"
)

// Backend selects where a model runs.
type Backend int32

const (
	BackendAuto Backend = C.GLM5RT_BACKEND_AUTO // CUDA when a usable GPU exists, else the CPU
	BackendCPU  Backend = C.GLM5RT_BACKEND_CPU
	BackendCUDA Backend = C.GLM5RT_BACKEND_CUDA
)

func (b Backend) String() string {
	switch b {
	case BackendCPU:
		return "cpu"
	case BackendCUDA:
		return "cuda"
	}
	return "auto"
}

// ModelOptions are the options of LoadModel; the zero value is the library's defaults.
type ModelOptions struct {
	Backend     Backend
	DeviceIndex int // CUDA device ordinal
	Threads     int // CPU threads; 0 = all
	// Progress, when set, receives the fraction loaded in [0, 1]; returning false cancels the load
	// (LoadModel then fails with StatusCancelled). Called on the loading goroutine.
	Progress func(fraction float32) bool
}

// Model is a loaded model: immutable, safe for concurrent use. Sessions and tokenizers keep their own
// reference, so the Model may be closed before them.
type Model struct {
	mu  sync.RWMutex
	ptr *C.glm5rt_model
}

// LoadModel loads config.json, the safetensors weights and tokenizer.json from dir (opts may be nil).
func LoadModel(dir string, opts *ModelOptions) (*Model, error) {
	if opts == nil {
		opts = &ModelOptions{}
	}
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	var state *progressState
	var handle cgo.Handle
	if opts.Progress != nil {
		state = &progressState{fn: opts.Progress}
		handle = cgo.NewHandle(state)
		defer handle.Delete()
	}
	var ptr *C.glm5rt_model
	err := call(func() C.glm5rt_status {
		return C.glm5rtgo_model_load(cdir, C.int32_t(opts.Backend), C.int32_t(opts.DeviceIndex),
			C.int32_t(opts.Threads), C.uintptr_t(handle), &ptr)
	})
	if state != nil && state.panicked != nil {
		C.glm5rt_model_free(ptr)
		panic(state.panicked)
	}
	if err != nil {
		return nil, err
	}
	m := &Model{ptr: ptr}
	runtime.SetFinalizer(m, (*Model).Close)
	return m, nil
}

// Close drops this reference on the model. Idempotent; safe to call from any goroutine.
func (m *Model) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ptr != nil {
		C.glm5rt_model_free(m.ptr)
		m.ptr = nil
		runtime.SetFinalizer(m, nil)
	}
}

// ModelInfo is what the library knows about a loaded model.
type ModelInfo struct {
	Layers, Vocab, HiddenSize, Heads       int
	RoutedExperts, ExpertsPerToken         int
	DenseLayers, KVLoraRank, QKRopeHeadDim int
	IndexTopK                              int
	WeightDtype                            int
	Backend                                Backend // the backend in use
	ContextLength, Params, WeightBytes     int64
	EOS                                    []int32
}

// Info describes the model.
func (m *Model) Info() (ModelInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return ModelInfo{}, errClosed("model")
	}
	var i C.glm5rt_model_info
	i.struct_size = C.uint32_t(unsafe.Sizeof(i))
	if err := call(func() C.glm5rt_status { return C.glm5rt_model_get_info(m.ptr, &i) }); err != nil {
		return ModelInfo{}, err
	}
	info := ModelInfo{
		Layers: int(i.n_layers), Vocab: int(i.n_vocab), HiddenSize: int(i.hidden_size), Heads: int(i.n_heads),
		RoutedExperts: int(i.n_routed_experts), ExpertsPerToken: int(i.n_experts_per_token),
		DenseLayers: int(i.n_dense_layers), KVLoraRank: int(i.kv_lora_rank), QKRopeHeadDim: int(i.qk_rope_head_dim),
		IndexTopK: int(i.index_topk), WeightDtype: int(i.weight_dtype), Backend: Backend(i.backend),
		ContextLength: int64(i.context_length), Params: int64(i.n_params), WeightBytes: int64(i.weight_bytes),
	}
	for k := 0; k < int(i.n_eos) && k < len(i.eos_ids); k++ {
		info.EOS = append(info.EOS, int32(i.eos_ids[k]))
	}
	return info, nil
}
