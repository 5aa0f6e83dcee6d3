// Command stream loads a model with a progress callback and streams one chat reply to stdout.
//
//	go run ./cmd/stream -model ../../models/glm5-demo -prompt 'What does `from_pretrained` do?'
//
// Ctrl-C cancels the reply (the context's cancellation reaches Session.Cancel).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"glm5rt"
)

func main() {
	model := flag.String("model", "../../models/glm5-demo", "model directory")
	prompt := flag.String("prompt", "What does `from_pretrained` do?", "the user message")
	system := flag.String("system", "", "system prompt")
	think := flag.Bool("think", false, "reasoning before the answer")
	temp := flag.Float64("temp", 0, "temperature (0 = greedy)")
	topP := flag.Float64("top-p", 0.95, "nucleus sampling when -temp > 0")
	seed := flag.Uint64("seed", 0x5eed, "sampling seed")
	maxNew := flag.Int("max-new", 256, "most tokens to generate")
	verbose := flag.Bool("v", false, "library log lines down to INFO")
	flag.Parse()
	if err := run(*model, *prompt, *system, *think, float32(*temp), float32(*topP), *seed, *maxNew, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "stream:", err)
		os.Exit(1)
	}
}

func run(dir, prompt, system string, think bool, temp, topP float32, seed uint64, maxNew int, verbose bool) error {
	if verbose {
		glm5rt.SetLogLevel(glm5rt.LogInfo)
		glm5rt.SetLogCallback(func(level glm5rt.LogLevel, line string) { fmt.Fprintf(os.Stderr, "[glm5rt %d] %s\n", level, line) })
		defer glm5rt.SetLogCallback(nil)
	}
	start := time.Now()
	lastPercent := -1
	m, err := glm5rt.LoadModel(dir, &glm5rt.ModelOptions{Progress: func(f float32) bool {
		if p := int(f * 100); p/25 != lastPercent/25 { // a line per quarter, readable in logs too
			lastPercent = p
			fmt.Fprintf(os.Stderr, "loading %3d%%\n", p)
		}
		return true
	}})
	if err != nil {
		return fmt.Errorf("loading %s: %w", dir, err)
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "glm5rt %s | %s: %d layers, vocab %d, backend %s | loaded in %.2f s\n",
		glm5rt.Version(), dir, info.Layers, info.Vocab, info.Backend, time.Since(start).Seconds())

	tok, err := m.Tokenizer()
	if err != nil {
		return err
	}
	defer tok.Close()
	opts := glm5rt.DefaultSessionOptions()
	opts.Seed = seed
	s, err := glm5rt.NewSession(m, &opts)
	if err != nil {
		return err
	}
	defer s.Close()

	var msgs []glm5rt.Message
	if system != "" {
		msgs = append(msgs, glm5rt.Message{Role: "system", Content: system})
	}
	msgs = append(msgs, glm5rt.Message{Role: "user", Content: prompt})
	text, err := tok.ChatFormat(msgs, glm5rt.ChatOptions{AddGenerationPrompt: true, Thinking: think})
	if err != nil {
		return err
	}
	ids, err := tok.Encode(text, true)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := s.Append(ids); err != nil {
		return err
	}
	prefill := time.Since(t0)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sampler := glm5rt.DefaultSampler()
	if temp > 0 {
		sampler.Temperature, sampler.TopP = temp, topP
	}
	t1 := time.Now()
	gen, err := s.Generate(ctx, tok, &sampler, maxNew, func(piece string) error {
		_, err := os.Stdout.WriteString(piece)
		return err
	})
	fmt.Println()
	elapsed := time.Since(t1)
	if errors.Is(err, glm5rt.ErrCancelled) {
		fmt.Fprintln(os.Stderr, "[cancelled]")
	} else if err != nil {
		return err
	}
	stopName := map[glm5rt.StopReason]string{glm5rt.StopEOS: "eos", glm5rt.StopMaxTokens: "max-new", glm5rt.StopError: "cancelled"}[gen.Stop]
	fmt.Fprintf(os.Stderr, "[prompt %d tokens in %.2f s | %d tokens in %.2f s, %.1f tok/s | stop: %s | session %d tokens]\n",
		len(ids), prefill.Seconds(), len(gen.Tokens), elapsed.Seconds(),
		float64(len(gen.Tokens))/elapsed.Seconds(), stopName, s.NTokens())
	return nil
}
