/* The conversation as a list of chat messages. The session's tokens are always the rendering of this
 * list (glm5rt_chat_format), so the model sees every earlier turn. */
#ifndef GLM5RT_CHAT_CONVERSATION_H
#define GLM5RT_CHAT_CONVERSATION_H

#include <glm5rt/glm5rt.h>

#include <stddef.h>

#include "text.h"

typedef struct chat_turn {
    char* role;      /* "system", "user", "assistant", "observation" */
    char* content;
    char* reasoning; /* assistant thinking text, NULL if none */
} chat_turn;

typedef struct conversation {
    chat_turn* turns;
    size_t n;
    size_t cap;
} conversation;

/* Copies role, content[0..content_len) and reasoning (may be NULL). 0 on success, -1 out of memory. */
int conversation_add(conversation* c, const char* role, const char* content, size_t content_len,
                     const char* reasoning, size_t reasoning_len);
void conversation_pop(conversation* c);
void conversation_clear(conversation* c);
void conversation_free(conversation* c);

/* Renders the conversation in the model's chat format into *out (replacing its contents);
 * flags: GLM5RT_CHAT_* . */
glm5rt_status conversation_render(const conversation* c, const glm5rt_tokenizer* tok, uint32_t flags,
                                  text* out);

/* Rebuilds the messages from a rendered transcript (the detokenized tokens of a loaded session):
 * "[gMASK]<sop><|system|>...<|user|>...<|assistant|></think>...<|user|>". A trailing empty user tag
 * is the end-of-turn token the model generated, not a message. 0 on success, -1 out of memory. */
int conversation_from_transcript(conversation* c, const char* transcript, size_t len);

#endif
