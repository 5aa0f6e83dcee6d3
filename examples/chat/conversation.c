#include "conversation.h"

#include <stdlib.h>
#include <string.h>

int conversation_add(conversation* c, const char* role, const char* content, size_t content_len,
                     const char* reasoning, size_t reasoning_len) {
    chat_turn t;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        chat_turn* grown = (chat_turn*)realloc(c->turns, cap * sizeof *grown);
        if (!grown) return -1;
        c->turns = grown;
        c->cap = cap;
    }
    t.role = copy_bytes(role, strlen(role));
    t.content = copy_bytes(content, content_len);
    t.reasoning = reasoning ? copy_bytes(reasoning, reasoning_len) : NULL;
    if (!t.role || !t.content || (reasoning && !t.reasoning)) {
        free(t.role);
        free(t.content);
        free(t.reasoning);
        return -1;
    }
    c->turns[c->n++] = t;
    return 0;
}

void conversation_pop(conversation* c) {
    if (c->n == 0) return;
    --c->n;
    free(c->turns[c->n].role);
    free(c->turns[c->n].content);
    free(c->turns[c->n].reasoning);
}

void conversation_clear(conversation* c) {
    while (c->n) conversation_pop(c);
}

void conversation_free(conversation* c) {
    conversation_clear(c);
    free(c->turns);
    c->turns = NULL;
    c->cap = 0;
}

glm5rt_status conversation_render(const conversation* c, const glm5rt_tokenizer* tok, uint32_t flags,
                                  text* out) {
    glm5rt_chat_message* msgs = NULL;
    size_t i, needed = 0;
    glm5rt_status st;
    if (c->n) {
        msgs = (glm5rt_chat_message*)calloc(c->n, sizeof *msgs);
        if (!msgs) return GLM5RT_ERR_OUT_OF_MEMORY;
    }
    for (i = 0; i < c->n; ++i) {
        msgs[i].role = c->turns[i].role;
        msgs[i].content = c->turns[i].content;
        msgs[i].reasoning = c->turns[i].reasoning;
        msgs[i].tool_calls_json = NULL;
    }
    /* size query first, then the real call */
    st = glm5rt_chat_format(tok, msgs, c->n, flags, NULL, 0, &needed);
    if (st == GLM5RT_OK) {
        if (text_reserve(out, needed) != 0) {
            st = GLM5RT_ERR_OUT_OF_MEMORY;
        } else {
            st = glm5rt_chat_format(tok, msgs, c->n, flags, out->data, needed, &needed);
            if (st == GLM5RT_OK) {
                out->len = needed;
                out->data[needed] = '\0';
            }
        }
    }
    free(msgs);
    return st;
}

/* The role tags of the GLM-5 chat format. */
static const char* const k_tags[] = {"<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"};
static const char* const k_roles[] = {"system", "user", "assistant", "observation"};
enum { N_TAGS = 4 };

/* The first role tag at or after p (NULL if none); *which receives its index. */
static const char* next_tag(const char* p, const char* end, int* which) {
    const char* best = NULL;
    int t;
    for (; p < end && !best; ++p) {
        if (*p != '<') continue;
        for (t = 0; t < N_TAGS; ++t) {
            size_t n = strlen(k_tags[t]);
            if ((size_t)(end - p) >= n && memcmp(p, k_tags[t], n) == 0) {
                best = p;
                *which = t;
                break;
            }
        }
    }
    return best;
}

static int starts_with(const char* p, const char* end, const char* prefix) {
    size_t n = strlen(prefix);
    return (size_t)(end - p) >= n && memcmp(p, prefix, n) == 0;
}

int conversation_from_transcript(conversation* c, const char* transcript, size_t len) {
    const char* end = transcript + len;
    const char* eot = "<|endoftext|>";
    int which = 0;
    const char* p = next_tag(transcript, end, &which);
    conversation_clear(c);
    while (p) {
        const char* body = p + strlen(k_tags[which]);
        int next_which = 0;
        const char* next = next_tag(body, end, &next_which);
        const char* body_end = next ? next : end;
        const char* reasoning = NULL;
        size_t reasoning_len = 0;
        /* the eos token <|endoftext|> may close a reply */
        if ((size_t)(body_end - body) >= strlen(eot) && memcmp(body_end - strlen(eot), eot, strlen(eot)) == 0)
            body_end -= strlen(eot);
        if (which == 2) { /* assistant: "</think>answer" or "<think>reasoning</think>answer" */
            if (starts_with(body, body_end, "<think>")) {
                const char* r = body + strlen("<think>");
                const char* close = r;
                while (close < body_end && !starts_with(close, body_end, "</think>")) ++close;
                reasoning = r;
                reasoning_len = (size_t)(close - r);
                body = close < body_end ? close + strlen("</think>") : body_end;
            } else if (starts_with(body, body_end, "</think>")) {
                body += strlen("</think>");
            }
        }
        /* a trailing empty user tag is the end-of-turn token of the last reply */
        if (!(next == NULL && which == 1 && body == body_end)) {
            if (conversation_add(c, k_roles[which], body, (size_t)(body_end - body), reasoning,
                                 reasoning_len) != 0)
                return -1;
        }
        p = next;
        which = next_which;
    }
    return 0;
}
