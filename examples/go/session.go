package glm5rt

/*
#include <stdlib.h>
#include <glm5rt/glm5rt.h>
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"unsafe"
)

// SessionOptions are the options of NewSession; start from DefaultSessionOptions.
type SessionOptions struct {
	MaxTokens    int64  // most tokens the session may hold; 0 = the model's context length
	CacheBytes   int64  // cache budget; 0 = enough for MaxTokens
	PageSize     int    // tokens per cache page
	PrefillChunk int    // longest piece of a prompt computed in one forward
	Seed         uint64 // sampling RNG seed
}

// DefaultSessionOptions are the library's defaults.
func DefaultSessionOptions() SessionOptions {
	var p C.glm5rt_session_params
	C.glm5rt_session_default_params(&p)
	return SessionOptions{MaxTokens: int64(p.max_tokens), CacheBytes: int64(p.cache_bytes),
		PageSize: int(p.page_size), PrefillChunk: int(p.prefill_chunk), Seed: uint64(p.seed)}
}

// Sampler holds sampling parameters; start from DefaultSampler (greedy). Order in the library:
// repetition penalty, temperature, top-k, top-p, min-p, then a draw with the session's seeded RNG.
type Sampler struct {
	Temperature       float32 // <= 0: greedy (argmax, lowest id wins ties)
	TopK              int     // 0 = off
	TopP              float32 // 1 = off
	MinP              float32 // 0 = off
	RepetitionPenalty float32 // 1 = off
	PenaltyLastN      int     // window of the penalty; -1 = the whole session
}

// DefaultSampler is the library's default: greedy.
func DefaultSampler() Sampler {
	var p C.glm5rt_sampler_params
	C.glm5rt_sampler_default_params(&p)
	return Sampler{Temperature: float32(p.temperature), TopK: int(p.top_k), TopP: float32(p.top_p),
		MinP: float32(p.min_p), RepetitionPenalty: float32(p.repetition_penalty), PenaltyLastN: int(p.penalty_last_n)}
}

func (s *Sampler) raw() C.glm5rt_sampler_params {
	var p C.glm5rt_sampler_params
	C.glm5rt_sampler_default_params(&p)
	if s != nil {
		p.temperature = C.float(s.Temperature)
		p.top_k = C.int32_t(s.TopK)
		p.top_p = C.float(s.TopP)
		p.min_p = C.float(s.MinP)
		p.repetition_penalty = C.float(s.RepetitionPenalty)
		p.penalty_last_n = C.int32_t(s.PenaltyLastN)
	}
	return p
}

// Session is a token sequence with its attention cache. Use it from one goroutine at a time; Cancel
// may be called from any goroutine.
type Session struct {
	// mu is read-locked by every call (so Close waits for a running one and Cancel can run beside
	// it) and write-locked by Close.
	mu  sync.RWMutex
	ptr *C.glm5rt_session
}

// NewSession creates an empty session on m (opts nil = defaults). It holds its own model reference.
func NewSession(m *Model, opts *SessionOptions) (*Session, error) {
	o := DefaultSessionOptions()
	if opts != nil {
		o = *opts
	}
	var p C.glm5rt_session_params
	C.glm5rt_session_default_params(&p)
	p.max_tokens = C.int64_t(o.MaxTokens)
	p.cache_bytes = C.int64_t(o.CacheBytes)
	p.page_size = C.int32_t(o.PageSize)
	p.prefill_chunk = C.int32_t(o.PrefillChunk)
	p.seed = C.uint64_t(o.Seed)
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return nil, errClosed("model")
	}
	var ptr *C.glm5rt_session
	if err := call(func() C.glm5rt_status { return C.glm5rt_session_create(m.ptr, &p, &ptr) }); err != nil {
		return nil, err
	}
	s := &Session{ptr: ptr}
	runtime.SetFinalizer(s, (*Session).Close)
	return s, nil
}

// Close frees the session. Idempotent; waits for a call in progress.
func (s *Session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr != nil {
		C.glm5rt_session_free(s.ptr)
		s.ptr = nil
		runtime.SetFinalizer(s, nil)
	}
}

func (s *Session) use(f func(p *C.glm5rt_session) C.glm5rt_status) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.ptr == nil {
		return errClosed("session")
	}
	return call(func() C.glm5rt_status { return f(s.ptr) })
}

// Cancel asks the running (or next) compute call to stop: it then fails with ErrCancelled and leaves
// the session as before it. Safe from any goroutine.
func (s *Session) Cancel() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.ptr != nil {
		C.glm5rt_session_cancel(s.ptr)
	}
}

// Append adds tokens (prefill); the logits of the last position become available.
func (s *Session) Append(tokens []int32) error {
	if len(tokens) == 0 {
		return s.use(func(p *C.glm5rt_session) C.glm5rt_status { return C.glm5rt_session_append(p, nil, 0, nil) })
	}
	return s.use(func(p *C.glm5rt_session) C.glm5rt_status {
		return C.glm5rt_session_append(p, (*C.int32_t)(unsafe.Pointer(&tokens[0])), C.size_t(len(tokens)), nil)
	})
}

// Logits returns a copy of the last position's logits.
func (s *Session) Logits() ([]float32, error) {
	var out []float32
	err := s.use(func(p *C.glm5rt_session) C.glm5rt_status {
		var logits *C.float
		var n C.int32_t
		st := C.glm5rt_session_logits(p, &logits, &n)
		if st == C.GLM5RT_OK {
			out = append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(logits)), int(n))...)
		}
		return st
	})
	return out, err
}

// NTokens is the number of tokens the session holds.
func (s *Session) NTokens() int {
	n := 0
	_ = s.use(func(p *C.glm5rt_session) C.glm5rt_status { n = int(C.glm5rt_session_n_tokens(p)); return C.GLM5RT_OK })
	return n
}

// Tokens returns the tokens the session holds.
func (s *Session) Tokens() ([]int32, error) {
	var ids []int32
	err := s.use(func(p *C.glm5rt_session) C.glm5rt_status {
		var n C.size_t
		st := C.glm5rt_session_tokens(p, nil, 0, &n)
		if st != C.GLM5RT_OK || n == 0 {
			return st
		}
		ids = make([]int32, int(n))
		st = C.glm5rt_session_tokens(p, (*C.int32_t)(unsafe.Pointer(&ids[0])), n, &n)
		ids = ids[:int(n)]
		return st
	})
	return ids, err
}

// Reset forgets every token.
func (s *Session) Reset() error {
	return s.use(func(p *C.glm5rt_session) C.glm5rt_status { return C.glm5rt_session_reset(p) })
}

// Truncate keeps the first nKeep tokens.
func (s *Session) Truncate(nKeep int) error {
	return s.use(func(p *C.glm5rt_session) C.glm5rt_status { return C.glm5rt_session_truncate(p, C.int64_t(nKeep)) })
}

// SetSeed reseeds the sampling RNG.
func (s *Session) SetSeed(seed uint64) error {
	return s.use(func(p *C.glm5rt_session) C.glm5rt_status { return C.glm5rt_session_set_seed(p, C.uint64_t(seed)) })
}

// Sample draws the next token from the current logits without appending it (nil sampler = greedy).
func (s *Session) Sample(sampler *Sampler) (int32, error) {
	params := sampler.raw()
	var tok C.int32_t
	err := s.use(func(p *C.glm5rt_session) C.glm5rt_status { return C.glm5rt_session_sample(p, &params, &tok) })
	return int32(tok), err
}

// Step samples the next token and appends it (nil sampler = greedy).
func (s *Session) Step(sampler *Sampler) (int32, error) {
	params := sampler.raw()
	var tok C.int32_t
	err := s.use(func(p *C.glm5rt_session) C.glm5rt_status { return C.glm5rt_session_step(p, &params, &tok) })
	return int32(tok), err
}

// Save writes the session (tokens, cache, logits, RNG) to a snapshot file.
func (s *Session) Save(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	return s.use(func(p *C.glm5rt_session) C.glm5rt_status { return C.glm5rt_session_save_file(p, cpath) })
}

// Load replaces the session's state with a snapshot (ErrMismatch if another model made it).
func (s *Session) Load(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	return s.use(func(p *C.glm5rt_session) C.glm5rt_status { return C.glm5rt_session_load_file(p, cpath) })
}

// StopReason says why Generate returned.
type StopReason int

const (
	StopEOS       StopReason = iota // an end-of-generation token (appended to the session, not emitted)
	StopMaxTokens                   // maxNew tokens were generated
	StopError                       // a call failed or ctx was cancelled (see the error)
)

// Generation is the outcome of Generate.
type Generation struct {
	Tokens []int32 // the generated tokens, the end-of-generation token excluded
	Stop   StopReason
}

// Generate samples up to maxNew tokens from the session's current logits (append a prompt first),
// calling emit with the text each token completes, until an end-of-generation token. Cancelling ctx
// stops the running step (the error is then ErrCancelled); an error from emit stops generation too.
// (A cancellation that arrives just as a step returns can still leave the library's cancel request
// pending for the session's next call, which then fails with ErrCancelled: the flag is per call.)
func (s *Session) Generate(ctx context.Context, tok *Tokenizer, sampler *Sampler, maxNew int,
	emit func(text string) error) (Generation, error) {
	gen := Generation{Stop: StopError}
	stream, err := tok.NewStream()
	if err != nil {
		return gen, err
	}
	defer stream.Close()
	if err := ctx.Err(); err != nil {
		return gen, &Error{Status: StatusCancelled, Message: err.Error()}
	}
	// The watcher cancels only while a step runs: a cancel request outside a call would stay pending
	// and fail the session's next call (the ABI clears the flag when a call returns).
	var mu sync.Mutex
	stepping, stopped := false, false
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			mu.Lock()
			stopped = true
			if stepping {
				s.Cancel()
			}
			mu.Unlock()
		case <-done:
		}
	}()
	step := func() (int32, error) {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return 0, &Error{Status: StatusCancelled, Message: ctx.Err().Error()}
		}
		stepping = true
		mu.Unlock()
		t, err := s.Step(sampler)
		mu.Lock()
		stepping = false
		mu.Unlock()
		return t, err
	}
	for len(gen.Tokens) < maxNew {
		t, err := step()
		if err != nil {
			return gen, err
		}
		if tok.IsEOS(t) {
			gen.Stop = StopEOS
			break
		}
		gen.Tokens = append(gen.Tokens, t)
		text, err := stream.Push(t)
		if err != nil {
			return gen, err
		}
		if text != "" {
			if err := emit(text); err != nil {
				return gen, err
			}
		}
	}
	if len(gen.Tokens) == maxNew && gen.Stop != StopEOS {
		gen.Stop = StopMaxTokens
	}
	rest, err := stream.Flush()
	if err != nil {
		return gen, err
	}
	if rest != "" {
		if err := emit(rest); err != nil {
			return gen, err
		}
	}
	return gen, nil
}
