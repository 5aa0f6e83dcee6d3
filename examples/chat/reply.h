/* One assistant reply: bring the session in line with the rendered conversation (reusing the cached
 * prefix), then sample and stream tokens until an end-of-generation token. */
#ifndef GLM5RT_CHAT_REPLY_H
#define GLM5RT_CHAT_REPLY_H

#include <glm5rt/glm5rt.h>

#include <signal.h>
#include <stdio.h>

#include "conversation.h"

typedef struct reply_settings {
    const glm5rt_sampler_params* sampler;
    int thinking;   /* render the generation prompt with <think> (1) or </think> (0) */
    int max_new;
} reply_settings;

typedef struct reply_stats {
    size_t prompt_tokens;    /* tokens of the rendered conversation */
    size_t reused_tokens;    /* of those, already in the session's cache */
    double prompt_seconds;   /* time to compute the others */
    int prompt_done;         /* 1: the session holds the prompt (generation ran) */
    size_t new_tokens;       /* tokens generated (the end-of-turn token included) */
    double generate_seconds;
    int hit_eos;             /* 1: stopped at an end-of-generation token */
    int cancelled;           /* 1: Ctrl-C (glm5rt_session_cancel) stopped it */
} reply_stats;

/* Renders `conv` (whose last message is the user's) with the generation prompt, brings the session to
 * those tokens, streams the reply to `out` and appends it to `conv` as an assistant message (also when
 * cancelled midway, so that the conversation matches what the session holds). A reply cancelled while
 * the prompt was computed adds nothing and returns GLM5RT_ERR_CANCELLED. Other failures return their
 * status with glm5rt_last_error() set (or this example's own message written to stderr). */
glm5rt_status chat_reply(glm5rt_session* session, const glm5rt_tokenizer* tok, conversation* conv,
                         const reply_settings* settings, FILE* out, reply_stats* stats);

/* Replaces the session's tokens by `tokens`, keeping the longest common prefix already computed.
 * *reused receives the number of tokens kept. */
glm5rt_status sync_session(glm5rt_session* session, const int32_t* tokens, size_t n, size_t* reused);

double now_seconds(void);

#endif
