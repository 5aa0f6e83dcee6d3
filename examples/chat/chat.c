/* glm5rt-chat: a multi-turn chat with a GLM-5 model directory through the C ABI (glm5rt.h only).
 *
 *   glm5rt-chat models/glm5-demo                      interactive (or one message per stdin line)
 *   glm5rt-chat --prompt "What does \`foo\` do?" DIR   one-shot
 *
 * The conversation is kept as a list of messages rendered with glm5rt_chat_format; before each reply
 * the session is brought to that rendering, reusing the longest prefix it already holds, so every turn
 * sees the earlier ones and only the new text is computed. Ctrl-C cancels the reply being generated
 * (glm5rt_session_cancel from the signal handler) and returns to the prompt. */
#define _POSIX_C_SOURCE 200809L
#include <glm5rt/glm5rt.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conversation.h"
#include "options.h"
#include "reply.h"
#include "text.h"

/* ---------------------------------------------------------------- Ctrl-C */

static glm5rt_session* volatile g_session = NULL; /* the session a reply is running on, else NULL */
static volatile sig_atomic_t g_interrupted = 0;

static void on_sigint(int sig) {
    glm5rt_session* s = g_session;
    (void)sig;
    g_interrupted = 1;
    /* only while a reply runs: a cancel request outside one would hit the next turn's prefill */
    if (s) glm5rt_session_cancel(s);
}

static void install_sigint(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, NULL);
}

/* ---------------------------------------------------------------- loading */

typedef struct progress_state {
    double start;
    int drawn;  /* 1 once the bar is on screen */
    int tty;
} progress_state;

/* Draws a bar on stderr, only for loads long enough to notice and only on a terminal. Ctrl-C during
 * the load cancels it. */
static int32_t on_progress(float fraction, void* user_data) {
    progress_state* p = (progress_state*)user_data;
    int width = 40, filled, i;
    if (g_interrupted) return 0;
    if (!p->tty || (!p->drawn && now_seconds() - p->start < 0.5)) return 1;
    if (fraction < 0.0f) fraction = 0.0f;
    if (fraction > 1.0f) fraction = 1.0f;
    filled = (int)(fraction * (float)width + 0.5f);
    fputs("\rloading [", stderr);
    for (i = 0; i < width; ++i) fputc(i < filled ? '#' : ' ', stderr);
    fprintf(stderr, "] %3.0f%%", (double)fraction * 100.0);
    fflush(stderr);
    p->drawn = 1;
    return 1;
}

static const char* backend_name(int32_t backend) {
    return backend == GLM5RT_BACKEND_CUDA ? "cuda" : backend == GLM5RT_BACKEND_CPU ? "cpu" : "auto";
}

static void report(const char* what, glm5rt_status st) {
    fprintf(stderr, "glm5rt-chat: %s: %s (%s)\n", what, glm5rt_last_error(), glm5rt_status_string(st));
}

/* ---------------------------------------------------------------- input */

/* Reads one message: a line, continued while it ends in a backslash. Returns 1 with the message in
 * *msg, 0 at end of input, -1 when interrupted by Ctrl-C. */
static int read_message(FILE* in, text* msg, int interactive) {
    char* line = NULL;
    size_t cap = 0;
    ssize_t n;
    text_clear(msg);
    g_interrupted = 0; /* a Ctrl-C that cancelled the last reply is not one at this prompt */
    for (;;) {
        if (interactive) {
            fputs(msg->len ? "... " : "> ", stdout);
            fflush(stdout);
        }
        errno = 0;
        n = getline(&line, &cap, in);
        if (n < 0) {
            int interrupted = errno == EINTR || g_interrupted;
            clearerr(in);
            free(line);
            if (interrupted) return -1;
            return msg->len ? 1 : 0;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n > 0 && line[n - 1] == '\\') {
            line[n - 1] = '\n';
            text_append(msg, line, (size_t)n);
            continue;
        }
        text_append(msg, line, (size_t)n);
        free(line);
        return 1;
    }
}

/* ---------------------------------------------------------------- the chat */

typedef struct chat {
    chat_options opts;
    glm5rt_model* model;
    glm5rt_tokenizer* tok;
    glm5rt_session* session;
    conversation conv;
} chat;

/* Forgets the conversation, keeping the system prompt. */
static int start_conversation(chat* c) {
    conversation_clear(&c->conv);
    if (c->opts.system_prompt &&
        conversation_add(&c->conv, "system", c->opts.system_prompt, strlen(c->opts.system_prompt), NULL, 0))
        return -1;
    return 0;
}

/* Rebuilds the messages from the tokens of a session just loaded from a snapshot. */
static glm5rt_status conversation_from_session(chat* c) {
    size_t n = 0, len = 0;
    int32_t* ids = NULL;
    text transcript = {0};
    glm5rt_status st = glm5rt_session_tokens(c->session, NULL, 0, &n);
    if (st != GLM5RT_OK) return st;
    ids = (int32_t*)malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return GLM5RT_ERR_OUT_OF_MEMORY;
    st = glm5rt_session_tokens(c->session, ids, n, &n);
    if (st == GLM5RT_OK) st = glm5rt_detokenize(c->tok, ids, n, 0, NULL, 0, &len);
    if (st == GLM5RT_OK && text_reserve(&transcript, len) != 0) st = GLM5RT_ERR_OUT_OF_MEMORY;
    if (st == GLM5RT_OK) st = glm5rt_detokenize(c->tok, ids, n, 0, transcript.data, len, &len);
    if (st == GLM5RT_OK && conversation_from_transcript(&c->conv, transcript.data, len) != 0)
        st = GLM5RT_ERR_OUT_OF_MEMORY;
    free(ids);
    text_free(&transcript);
    return st;
}

static void print_help(void) {
    fputs("commands:\n"
          "  /reset        forget the conversation (the system prompt stays)\n"
          "  /save FILE    write the session (tokens and cache) to FILE\n"
          "  /load FILE    continue the conversation saved in FILE\n"
          "  /think on|off reasoning before the answer\n"
          "  /quit         leave (Ctrl-D too)\n"
          "  /help         this text\n"
          "Ctrl-C cancels the reply being generated. End a line with '\\' to continue the message on the\n"
          "next line.\n",
          stderr);
}

/* Runs one /command. Returns 0 to go on, 1 to quit. */
static int run_command(chat* c, const char* line) {
    const char* arg = strchr(line, ' ');
    size_t name_len = arg ? (size_t)(arg - line) : strlen(line);
    glm5rt_status st;
    while (arg && *arg == ' ') ++arg;
    if (arg && *arg == '\0') arg = NULL;
#define IS(name) (name_len == strlen(name) && strncmp(line, name, name_len) == 0)
    if (IS("/quit") || IS("/exit")) return 1;
    if (IS("/help")) {
        print_help();
    } else if (IS("/reset")) {
        st = glm5rt_session_reset(c->session);
        if (st != GLM5RT_OK) report("reset", st);
        else if (start_conversation(c) != 0) fprintf(stderr, "glm5rt-chat: out of memory\n");
        else fprintf(stderr, "[conversation reset]\n");
    } else if (IS("/save")) {
        if (!arg) {
            fprintf(stderr, "usage: /save FILE\n");
        } else if ((st = glm5rt_session_save_file(c->session, arg)) != GLM5RT_OK) {
            report("save", st);
        } else {
            fprintf(stderr, "[saved %lld tokens to %s]\n", (long long)glm5rt_session_n_tokens(c->session), arg);
        }
    } else if (IS("/load")) {
        if (!arg) {
            fprintf(stderr, "usage: /load FILE\n");
        } else if ((st = glm5rt_session_load_file(c->session, arg)) != GLM5RT_OK) {
            report("load", st);
        } else if ((st = conversation_from_session(c)) != GLM5RT_OK) {
            report("reading the loaded conversation", st);
        } else {
            fprintf(stderr, "[loaded %lld tokens, %zu messages from %s]\n",
                    (long long)glm5rt_session_n_tokens(c->session), c->conv.n, arg);
        }
    } else if (IS("/think")) {
        if (arg && strcmp(arg, "on") == 0) c->opts.thinking = 1;
        else if (arg && strcmp(arg, "off") == 0) c->opts.thinking = 0;
        else fprintf(stderr, "usage: /think on|off\n");
        fprintf(stderr, "[thinking %s]\n", c->opts.thinking ? "on" : "off");
    } else {
        fprintf(stderr, "unknown command %.*s (try /help)\n", (int)name_len, line);
    }
#undef IS
    return 0;
}

static void print_stats(const chat* c, const reply_stats* s) {
    size_t computed = s->prompt_tokens - s->reused_tokens;
    fprintf(stderr, "[prompt %zu tokens (%zu new) in %.2f s, %.1f tok/s | reply %zu tokens in %.2f s, "
                    "%.1f tok/s | session %lld tokens%s]\n",
            s->prompt_tokens, computed, s->prompt_seconds,
            s->prompt_seconds > 0 ? (double)computed / s->prompt_seconds : 0.0, s->new_tokens,
            s->generate_seconds, s->generate_seconds > 0 ? (double)s->new_tokens / s->generate_seconds : 0.0,
            (long long)glm5rt_session_n_tokens(c->session),
            s->cancelled ? ", cancelled" : s->hit_eos ? "" : ", stopped at --max-new");
}

/* One user turn: returns 0 on success or a recoverable failure, -1 when the chat cannot go on. */
static int user_turn(chat* c, const char* message, size_t len, const reply_settings* settings) {
    reply_stats stats;
    size_t before = c->conv.n;
    glm5rt_status st;
    if (conversation_add(&c->conv, "user", message, len, NULL, 0) != 0) {
        fprintf(stderr, "glm5rt-chat: out of memory\n");
        return -1;
    }
    g_interrupted = 0;
    g_session = c->session;
    st = chat_reply(c->session, c->tok, &c->conv, settings, stdout, &stats);
    g_session = NULL;
    if (c->conv.n == before + 1) conversation_pop(&c->conv); /* no reply recorded: drop the message */
    if (stats.cancelled) fprintf(stderr, "[cancelled]\n");
    if (st == GLM5RT_ERR_CACHE_FULL) {
        report("the session is full (try /reset or a larger --ctx)", st);
    } else if (st != GLM5RT_OK && st != GLM5RT_ERR_CANCELLED) {
        report("reply", st);
        return -1;
    }
    if (!c->opts.quiet && stats.prompt_done) print_stats(c, &stats);
    return 0;
}

static int run(chat* c) {
    reply_settings settings;
    text msg = {0};
    int interactive = isatty(STDIN_FILENO), rc = 0;
    size_t i;
    settings.sampler = &c->opts.sampler;
    settings.max_new = c->opts.max_new;

    if (c->opts.n_prompts) { /* one-shot turns */
        for (i = 0; i < c->opts.n_prompts && rc == 0; ++i) {
            settings.thinking = c->opts.thinking;
            rc = user_turn(c, c->opts.prompts[i], strlen(c->opts.prompts[i]), &settings);
        }
        return rc;
    }
    for (;;) {
        int got = read_message(stdin, &msg, interactive);
        if (got == 0) {
            if (interactive) fputc('\n', stdout); /* leave the terminal on a fresh line after Ctrl-D */
            break;
        }
        if (got < 0) {
            g_interrupted = 0;
            fputs("\n(Ctrl-C cancels a reply; /quit or Ctrl-D leaves)\n", stderr);
            continue;
        }
        if (msg.len == 0) continue;
        if (msg.data[0] == '/') {
            if (run_command(c, msg.data)) break;
            continue;
        }
        settings.thinking = c->opts.thinking;
        if (user_turn(c, msg.data, msg.len, &settings) != 0) {
            rc = -1;
            break;
        }
    }
    text_free(&msg);
    return rc;
}

int main(int argc, char** argv) {
    chat c;
    glm5rt_model_params mp;
    glm5rt_session_params sp;
    glm5rt_model_info info;
    progress_state progress;
    glm5rt_status st;
    int parsed, rc = 1;
    double t0;

    memset(&c, 0, sizeof c);
    parsed = parse_options(argc, argv, &c.opts);
    if (parsed != 0) {
        free((void*)c.opts.prompts);
        return parsed > 0 ? 0 : 2;
    }
    if (c.opts.verbose) glm5rt_set_log_level(GLM5RT_LOG_INFO);
    install_sigint();

    glm5rt_model_default_params(&mp);
    mp.backend = c.opts.backend;
    mp.n_threads = c.opts.threads;
    progress.start = now_seconds();
    progress.drawn = 0;
    progress.tty = isatty(STDERR_FILENO);
    mp.progress = on_progress;
    mp.progress_user_data = &progress;
    t0 = now_seconds();
    st = glm5rt_model_load(c.opts.model_dir, &mp, &c.model);
    if (progress.drawn) fputc('\n', stderr);
    if (st != GLM5RT_OK) {
        report(c.opts.model_dir, st);
        goto out;
    }
    info.struct_size = sizeof info;
    st = glm5rt_model_get_info(c.model, &info);
    if (st != GLM5RT_OK) {
        report("model info", st);
        goto out;
    }
    if ((st = glm5rt_tokenizer_from_model(c.model, &c.tok)) != GLM5RT_OK) {
        report("tokenizer", st);
        goto out;
    }
    glm5rt_session_default_params(&sp);
    sp.max_tokens = c.opts.context;
    sp.seed = c.opts.seed;
    if ((st = glm5rt_session_create(c.model, &sp, &c.session)) != GLM5RT_OK) {
        report("session", st);
        goto out;
    }
    if (start_conversation(&c) != 0) {
        fprintf(stderr, "glm5rt-chat: out of memory\n");
        goto out;
    }
    if (!c.opts.quiet) {
        fprintf(stderr,
                "glm5rt %s | %s: %d layers, %d experts (top %d), vocab %d, %.1fM parameters | backend %s | "
                "loaded in %.2f s\n",
                glm5rt_version(), c.opts.model_dir, info.n_layers, info.n_routed_experts,
                info.n_experts_per_token, info.n_vocab, (double)info.n_params / 1e6, backend_name(info.backend),
                now_seconds() - t0);
        if (c.opts.sampler.temperature > 0.0f)
            fprintf(stderr, "thinking %s | sampling T=%g top-k %d top-p %g min-p %g | seed %llu\n",
                    c.opts.thinking ? "on" : "off", (double)c.opts.sampler.temperature,
                    (int)c.opts.sampler.top_k, (double)c.opts.sampler.top_p, (double)c.opts.sampler.min_p,
                    (unsigned long long)c.opts.seed);
        else
            fprintf(stderr, "thinking %s | greedy\n", c.opts.thinking ? "on" : "off");
        if (isatty(STDIN_FILENO) && c.opts.n_prompts == 0)
            fprintf(stderr, "type a message, /help for commands, Ctrl-D to leave\n");
    }
    rc = run(&c) == 0 ? 0 : 1;

out:
    conversation_free(&c.conv);
    glm5rt_session_free(c.session);
    glm5rt_tokenizer_free(c.tok);
    glm5rt_model_free(c.model);
    free((void*)c.opts.prompts);
    return rc;
}
