package glm5rt

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// demoDir is the repository's demo model, or $GLM5RT_DEMO_MODEL.
func demoDir() string {
	if d := os.Getenv("GLM5RT_DEMO_MODEL"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "models", "glm5-demo")
}

type reference struct {
	Prompt     string `json:"prompt"`
	GreedyText string `json:"greedy_text"`
}

// loadReference returns the reference prompt and its greedy answer up to the first eos ("<|user|>";
// reference.json was generated with eos disabled).
func loadReference(t *testing.T) (prompt, answer string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(demoDir(), "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	return ref.Prompt, strings.SplitN(ref.GreedyText, "<|user|>", 2)[0]
}

func loadDemo(t *testing.T) (*Model, *Tokenizer) {
	t.Helper()
	m, err := LoadModel(demoDir(), nil)
	if err != nil {
		t.Fatalf("loading the demo model: %v", err)
	}
	tok, err := m.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tok.Close(); m.Close() })
	return m, tok
}

func TestVersion(t *testing.T) {
	if Version() == "" {
		t.Fatal("empty version")
	}
	if ABIVersion() != HeaderABIVersion {
		t.Fatalf("library ABI %d, header ABI %d", ABIVersion(), HeaderABIVersion)
	}
}

func TestStatusStrings(t *testing.T) {
	if StatusCacheFull.String() != "cache full" || StatusCancelled != 7 {
		t.Fatalf("%q %d", StatusCacheFull.String(), StatusCancelled)
	}
}

func TestMissingDirectoryIsAnErrorWithAMessage(t *testing.T) {
	m, err := LoadModel("/nonexistent/glm5rt/model", nil)
	if err == nil || m != nil {
		t.Fatal("loading a missing directory must fail")
	}
	var e *Error
	if !errors.As(err, &e) || e.Message == "" || e.Status == StatusOK {
		t.Fatalf("want *Error with a message, got %#v", err)
	}
	if !strings.Contains(err.Error(), e.Message) {
		t.Fatalf("Error() %q lacks the message", err.Error())
	}
	if !errors.Is(err, &Error{Status: e.Status}) {
		t.Fatal("errors.Is must match an error of the same status")
	}
	if e.Status != StatusCacheFull && errors.Is(err, ErrCacheFull) {
		t.Fatal("errors.Is must not match another status")
	}
}

func TestProgressCallbackAndCancel(t *testing.T) {
	var fractions []float32
	m, err := LoadModel(demoDir(), &ModelOptions{Progress: func(f float32) bool {
		fractions = append(fractions, f)
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if len(fractions) == 0 {
		t.Fatal("the progress callback was never called")
	}
	for i, f := range fractions {
		if f < 0 || f > 1 || (i > 0 && f < fractions[i-1]) {
			t.Fatalf("progress not monotonic in [0,1]: %v", fractions)
		}
	}
	// returning false cancels the load
	_, err = LoadModel(demoDir(), &ModelOptions{Progress: func(float32) bool { return false }})
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("want ErrCancelled, got %v", err)
	}
	// a panic in the callback cancels the load and resurfaces in Go, not through the C++ frames
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("want the callback's panic, got %v", r)
			}
		}()
		_, _ = LoadModel(demoDir(), &ModelOptions{Progress: func(float32) bool { panic("boom") }})
	}()
}

func TestLogCallbackReceivesWholeLines(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	SetLogLevel(LogDebug)
	SetLogCallback(func(level LogLevel, line string) {
		mu.Lock()
		lines = append(lines, line)
		mu.Unlock()
	})
	m, err := LoadModel(demoDir(), nil)
	SetLogCallback(nil)
	SetLogLevel(LogWarn)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	for _, l := range lines {
		if strings.Contains(l, "\n") {
			t.Fatalf("a log line with a newline: %q", l)
		}
	}
	if logHandle != 0 {
		t.Fatal("the Go sink's handle was not released")
	}
	if len(lines) == 0 {
		t.Fatal("no log line reached the Go callback while loading at DEBUG")
	}
	t.Logf("%d log lines while loading at DEBUG: %q", len(lines), lines[0])
}

func TestChatFormatRendersTheReferencePrompt(t *testing.T) {
	tok, err := LoadTokenizer(demoDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	prompt, _ := loadReference(t)
	q := prompt[strings.Index(prompt, "<|user|>")+len("<|user|>") : strings.Index(prompt, "<|assistant|>")]
	got, err := tok.ChatFormat([]Message{{Role: "user", Content: q}}, ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if got != prompt {
		t.Fatalf("rendered %q, reference %q", got, prompt)
	}
	id, err := tok.Lookup("<|assistant|>")
	if err != nil || id < 0 {
		t.Fatalf("lookup: %d %v", id, err)
	}
}

func TestGreedyStreamMatchesTheReference(t *testing.T) {
	m, tok := loadDemo(t)
	prompt, answer := loadReference(t)
	ids, err := tok.Encode(prompt, true)
	if err != nil || len(ids) == 0 {
		t.Fatalf("encode: %v %v", ids, err)
	}
	s, err := NewSession(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(ids); err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	gen, err := s.Generate(context.Background(), tok, nil, 200, func(p string) error {
		streamed.WriteString(p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if gen.Stop != StopEOS || len(gen.Tokens) < 5 {
		t.Fatalf("stop %v after %d tokens: %q", gen.Stop, len(gen.Tokens), streamed.String())
	}
	decoded, err := tok.Decode(gen.Tokens, false)
	if err != nil {
		t.Fatal(err)
	}
	if streamed.String() != decoded {
		t.Fatalf("stream %q != decode %q", streamed.String(), decoded)
	}
	if decoded != answer {
		t.Fatalf("greedy answer\n%q\nwant\n%q", decoded, answer)
	}
	if s.NTokens() != len(ids)+len(gen.Tokens)+1 {
		t.Fatalf("session holds %d tokens, want %d", s.NTokens(), len(ids)+len(gen.Tokens)+1)
	}
}

func TestSecondTurnSeesTheFirst(t *testing.T) {
	m, tok := loadDemo(t)
	s, err := NewSession(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msgs := []Message{{Role: "user", Content: "What does `from_pretrained` do?"}}
	reply := func() string {
		text, err := tok.ChatFormat(msgs, ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := tok.Encode(text, true)
		if err != nil {
			t.Fatal(err)
		}
		// keep what the session already holds of this prompt, append the rest
		held, err := s.Tokens()
		if err != nil {
			t.Fatal(err)
		}
		keep := 0
		for keep < len(held) && keep < len(ids)-1 && held[keep] == ids[keep] {
			keep++
		}
		if err := s.Truncate(keep); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ids[keep:]); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if _, err := s.Generate(context.Background(), tok, nil, 100, func(p string) error { b.WriteString(p); return nil }); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	first := reply()
	n1 := s.NTokens()
	msgs = append(msgs, Message{Role: "assistant", Content: first}, Message{Role: "user", Content: "What is `forward` for?"})
	second := reply()
	if first == "" || second == "" {
		t.Fatalf("empty reply: %q %q", first, second)
	}
	held, _ := s.Tokens()
	text, _ := tok.Decode(held, false)
	if !strings.Contains(text, first) || s.NTokens() <= n1 {
		t.Fatalf("the second turn does not contain the first: %q", text)
	}
}

func TestCancelledContextStopsAndKeepsTheSession(t *testing.T) {
	m, tok := loadDemo(t)
	s, err := NewSession(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, _ := tok.Encode("[gMASK]<sop><|user|>hi<|assistant|></think>", true)
	if err := s.Append(ids); err != nil {
		t.Fatal(err)
	}
	// a cancel from another goroutine stops the next step, which leaves the session unchanged
	done := make(chan struct{})
	go func() { s.Cancel(); close(done) }()
	<-done
	if _, err := s.Step(nil); !errors.Is(err, ErrCancelled) {
		t.Fatalf("want ErrCancelled, got %v", err)
	}
	if s.NTokens() != len(ids) {
		t.Fatalf("a cancelled step changed the session: %d tokens", s.NTokens())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Generate(ctx, tok, nil, 10, func(string) error { return nil }); !errors.Is(err, ErrCancelled) {
		t.Fatalf("want ErrCancelled from a cancelled context, got %v", err)
	}
	if _, err := s.Step(nil); err != nil {
		t.Fatalf("the session must work after a cancel: %v", err)
	}
}

func TestSnapshotRoundTripAndSeededSampling(t *testing.T) {
	m, tok := loadDemo(t)
	prompt, _ := loadReference(t)
	ids, _ := tok.Encode(prompt, true)
	sampler := DefaultSampler()
	sampler.Temperature, sampler.TopK, sampler.TopP = 1.0, 40, 0.95
	run := func(seed uint64) []int32 {
		o := DefaultSessionOptions()
		o.Seed = seed
		s, err := NewSession(m, &o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Append(ids); err != nil {
			t.Fatal(err)
		}
		var out []int32
		for i := 0; i < 24; i++ {
			tk, err := s.Step(&sampler)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tk)
		}
		return out
	}
	a, b := run(11), run(11)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different tokens: %v vs %v", a, b)
		}
	}

	s1, _ := NewSession(m, nil)
	defer s1.Close()
	if err := s1.Append(ids); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.snap")
	if err := s1.Save(path); err != nil {
		t.Fatal(err)
	}
	s2, _ := NewSession(m, nil)
	defer s2.Close()
	if err := s2.Load(path); err != nil {
		t.Fatal(err)
	}
	t1, _ := s1.Step(nil)
	t2, err := s2.Step(nil)
	if err != nil || t1 != t2 || s2.NTokens() != len(ids)+1 {
		t.Fatalf("loaded snapshot diverges: %d vs %d (%v), %d tokens", t1, t2, err, s2.NTokens())
	}
	if err := s2.Load(filepath.Join(t.TempDir(), "missing.snap")); err == nil {
		t.Fatal("loading a missing snapshot must fail")
	}
}

func TestConcurrentSessionsShareTheModel(t *testing.T) {
	m, tok := loadDemo(t)
	prompt, answer := loadReference(t)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := NewSession(m, nil)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			ids, _ := tok.Encode(prompt, true)
			if err := s.Append(ids); err != nil {
				errs <- err
				return
			}
			var b strings.Builder
			if _, err := s.Generate(context.Background(), tok, nil, 200, func(p string) error { b.WriteString(p); return nil }); err != nil {
				errs <- err
				return
			}
			if b.String() != answer {
				errs <- errors.New("concurrent answer differs: " + b.String())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestCloseIsIdempotentAndFinalizersFree(t *testing.T) {
	m, err := LoadModel(demoDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := m.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	// the session and tokenizer keep the model alive after its Close
	m.Close()
	m.Close()
	ids, _ := tok.Encode("[gMASK]<sop><|user|>hi<|assistant|>", true)
	if err := s.Append(ids); err != nil {
		t.Fatalf("a session must outlive its model's Close: %v", err)
	}
	s.Close()
	s.Close()
	if err := s.Append(ids); !errors.Is(err, ErrState) {
		t.Fatalf("a closed session must answer ErrState, got %v", err)
	}
	if _, err := m.Info(); !errors.Is(err, ErrState) {
		t.Fatalf("a closed model must answer ErrState, got %v", err)
	}
	tok.Close()
	// handles never closed are freed by their finalizers
	for i := 0; i < 4; i++ {
		m2, err := LoadModel(demoDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewSession(m2, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := m2.Tokenizer(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
}
