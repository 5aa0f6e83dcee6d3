package glm5rt

/*
#include <stdlib.h>
#include <glm5rt/glm5rt.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Tokenizer encodes and decodes text and renders chats. Immutable: safe for concurrent use.
type Tokenizer struct {
	mu  sync.RWMutex
	ptr *C.glm5rt_tokenizer
}

func newTokenizer(ptr *C.glm5rt_tokenizer) *Tokenizer {
	t := &Tokenizer{ptr: ptr}
	runtime.SetFinalizer(t, (*Tokenizer).Close)
	return t
}

// LoadTokenizer loads tokenizer.json (and tokenizer_config.json when present) from dir.
func LoadTokenizer(dir string) (*Tokenizer, error) {
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	var ptr *C.glm5rt_tokenizer
	if err := call(func() C.glm5rt_status { return C.glm5rt_tokenizer_load(cdir, &ptr) }); err != nil {
		return nil, err
	}
	return newTokenizer(ptr), nil
}

// Tokenizer returns a new handle on the model's tokenizer (ErrNotFound without tokenizer.json).
func (m *Model) Tokenizer() (*Tokenizer, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return nil, errClosed("model")
	}
	var ptr *C.glm5rt_tokenizer
	if err := call(func() C.glm5rt_status { return C.glm5rt_tokenizer_from_model(m.ptr, &ptr) }); err != nil {
		return nil, err
	}
	return newTokenizer(ptr), nil
}

// Close frees the handle. Idempotent.
func (t *Tokenizer) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ptr != nil {
		C.glm5rt_tokenizer_free(t.ptr)
		t.ptr = nil
		runtime.SetFinalizer(t, nil)
	}
}

// use runs f with the live handle (read-locked, so Close waits for running calls).
func (t *Tokenizer) use(f func(p *C.glm5rt_tokenizer) error) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.ptr == nil {
		return errClosed("tokenizer")
	}
	return f(t.ptr)
}

// VocabSize is the vocabulary size including added tokens.
func (t *Tokenizer) VocabSize() int {
	n := 0
	_ = t.use(func(p *C.glm5rt_tokenizer) error { n = int(C.glm5rt_tokenizer_vocab_size(p)); return nil })
	return n
}

// IsEOS reports whether token ends a generation.
func (t *Tokenizer) IsEOS(token int32) bool {
	eos := false
	_ = t.use(func(p *C.glm5rt_tokenizer) error {
		eos = C.glm5rt_tokenizer_is_eos(p, C.int32_t(token)) != 0
		return nil
	})
	return eos
}

// Encode returns the token ids of text; parseSpecial matches special tokens such as "<|user|>".
func (t *Tokenizer) Encode(text string, parseSpecial bool) ([]int32, error) {
	var flags C.uint32_t
	if parseSpecial {
		flags = C.GLM5RT_TOKENIZE_PARSE_SPECIAL
	}
	ctext := C.CString(text) // a C copy: its length is passed, so NUL bytes inside are fine
	defer C.free(unsafe.Pointer(ctext))
	var ids []int32
	err := t.use(func(p *C.glm5rt_tokenizer) error {
		return call(func() C.glm5rt_status {
			var n C.size_t
			st := C.glm5rt_tokenize(p, ctext, C.size_t(len(text)), flags, nil, 0, &n)
			if st != C.GLM5RT_OK || n == 0 {
				return st
			}
			ids = make([]int32, int(n))
			st = C.glm5rt_tokenize(p, ctext, C.size_t(len(text)), flags, (*C.int32_t)(unsafe.Pointer(&ids[0])), n, &n)
			ids = ids[:int(n)]
			return st
		})
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// Decode returns the text of ids; skipSpecial leaves out special tokens.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) (string, error) {
	var flags C.uint32_t
	if skipSpecial {
		flags = C.GLM5RT_DETOKENIZE_SKIP_SPECIAL
	}
	var cids *C.int32_t
	if len(ids) > 0 {
		cids = (*C.int32_t)(unsafe.Pointer(&ids[0]))
	}
	var out string
	err := t.use(func(p *C.glm5rt_tokenizer) error {
		return call(func() C.glm5rt_status {
			var n C.size_t
			st := C.glm5rt_detokenize(p, cids, C.size_t(len(ids)), flags, nil, 0, &n)
			if st != C.GLM5RT_OK || n == 0 {
				return st
			}
			buf := make([]byte, int(n))
			st = C.glm5rt_detokenize(p, cids, C.size_t(len(ids)), flags, (*C.char)(unsafe.Pointer(&buf[0])), n, &n)
			out = string(buf[:int(n)])
			return st
		})
	})
	return out, err
}

// Lookup returns the id of a special token given its exact text, e.g. "<|assistant|>".
func (t *Tokenizer) Lookup(text string) (int32, error) {
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	var id C.int32_t
	err := t.use(func(p *C.glm5rt_tokenizer) error {
		return call(func() C.glm5rt_status { return C.glm5rt_token_lookup(p, ctext, C.size_t(len(text)), &id) })
	})
	return int32(id), err
}

// Message is one chat message. Role is "system", "user", "assistant" or "observation".
type Message struct {
	Role, Content string
	Reasoning     string // an assistant message's thinking text ("" = none)
	ToolCallsJSON string // an assistant message's tool calls as a JSON array ("" = none)
}

// ChatOptions control ChatFormat.
type ChatOptions struct {
	AddGenerationPrompt bool // end with "<|assistant|>" and the thinking tag
	Thinking            bool // "<think>" (reasoning first) instead of "</think>"
}

// ChatFormat renders messages in the GLM-5 chat format (encode the result with parseSpecial).
func (t *Tokenizer) ChatFormat(messages []Message, opts ChatOptions) (string, error) {
	var flags C.uint32_t
	if opts.AddGenerationPrompt {
		flags |= C.GLM5RT_CHAT_ADD_GENERATION_PROMPT
	}
	if !opts.Thinking {
		flags |= C.GLM5RT_CHAT_THINKING_OFF
	}
	// The message array and its strings live in C memory for the call.
	n := len(messages)
	var cmsgs *C.glm5rt_chat_message
	if n > 0 {
		cmsgs = (*C.glm5rt_chat_message)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.glm5rt_chat_message{}))))
		if cmsgs == nil {
			return "", &Error{Status: StatusOutOfMemory, Message: "allocating chat messages"}
		}
		defer C.free(unsafe.Pointer(cmsgs))
	}
	arr := unsafe.Slice(cmsgs, n)
	var strs []*C.char
	defer func() {
		for _, s := range strs {
			C.free(unsafe.Pointer(s))
		}
	}()
	cstr := func(s string) *C.char {
		c := C.CString(s)
		strs = append(strs, c)
		return c
	}
	for i, m := range messages {
		arr[i].role = cstr(m.Role)
		arr[i].content = cstr(m.Content)
		if m.Reasoning != "" {
			arr[i].reasoning = cstr(m.Reasoning)
		}
		if m.ToolCallsJSON != "" {
			arr[i].tool_calls_json = cstr(m.ToolCallsJSON)
		}
	}
	var out string
	err := t.use(func(p *C.glm5rt_tokenizer) error {
		return call(func() C.glm5rt_status {
			var size C.size_t
			st := C.glm5rt_chat_format(p, cmsgs, C.size_t(n), flags, nil, 0, &size)
			if st != C.GLM5RT_OK || size == 0 {
				return st
			}
			buf := make([]byte, int(size))
			st = C.glm5rt_chat_format(p, cmsgs, C.size_t(n), flags, (*C.char)(unsafe.Pointer(&buf[0])), size, &size)
			out = string(buf[:int(size)])
			return st
		})
	})
	return out, err
}

// DetokStream decodes a token stream into whole UTF-8 text: Push returns the text each token completes
// (bytes of an unfinished character are held back), Flush what is left. One goroutine at a time.
type DetokStream struct {
	mu  sync.Mutex
	ptr *C.glm5rt_detok_stream
	tok *Tokenizer // kept reachable: the stream reads its tokenizer
}

// NewStream creates a streaming decoder on t.
func (t *Tokenizer) NewStream() (*DetokStream, error) {
	var ptr *C.glm5rt_detok_stream
	err := t.use(func(p *C.glm5rt_tokenizer) error {
		return call(func() C.glm5rt_status { return C.glm5rt_detok_stream_create(p, &ptr) })
	})
	if err != nil {
		return nil, err
	}
	s := &DetokStream{ptr: ptr, tok: t}
	runtime.SetFinalizer(s, (*DetokStream).Close)
	return s, nil
}

// Close frees the stream. Idempotent.
func (s *DetokStream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr != nil {
		C.glm5rt_detok_stream_free(s.ptr)
		s.ptr = nil
		runtime.SetFinalizer(s, nil)
	}
}

// pushOrFlush never sends a size query (it would already consume the token): a buffer first, and on
// BUFFER_TOO_SMALL (nothing consumed) one of the size needed.
func (s *DetokStream) pushOrFlush(f func(p *C.glm5rt_detok_stream, buf *C.char, cap C.size_t, n *C.size_t) C.glm5rt_status) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ptr == nil {
		return "", errClosed("stream")
	}
	var out string
	err := call(func() C.glm5rt_status {
		buf := make([]byte, 256)
		var n C.size_t
		st := f(s.ptr, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n)
		if st == C.GLM5RT_ERR_BUFFER_TOO_SMALL && int(n) > len(buf) {
			buf = make([]byte, int(n))
			st = f(s.ptr, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n)
		}
		if st == C.GLM5RT_OK {
			out = string(buf[:int(n)])
		}
		return st
	})
	runtime.KeepAlive(s.tok)
	return out, err
}

// Push adds one token and returns the text it completes (possibly "").
func (s *DetokStream) Push(token int32) (string, error) {
	return s.pushOrFlush(func(p *C.glm5rt_detok_stream, buf *C.char, cap C.size_t, n *C.size_t) C.glm5rt_status {
		return C.glm5rt_detok_stream_push(p, C.int32_t(token), buf, cap, n)
	})
}

// Flush returns what is held back (incomplete bytes become U+FFFD) and resets the stream.
func (s *DetokStream) Flush() (string, error) {
	return s.pushOrFlush(func(p *C.glm5rt_detok_stream, buf *C.char, cap C.size_t, n *C.size_t) C.glm5rt_status {
		return C.glm5rt_detok_stream_flush(p, buf, cap, n)
	})
}
