/* A growable byte buffer (UTF-8 text with an explicit length, always NUL-terminated for printing). */
#ifndef GLM5RT_CHAT_TEXT_H
#define GLM5RT_CHAT_TEXT_H

#include <stddef.h>

typedef struct text {
    char* data; /* NUL-terminated; NULL until the first append */
    size_t len;
    size_t cap;
} text;

/* Each returns 0 on success, -1 when memory runs out (the buffer is then unchanged). */
int text_reserve(text* t, size_t capacity);
int text_append(text* t, const char* bytes, size_t n);
int text_append_str(text* t, const char* s);
void text_clear(text* t);
void text_free(text* t);
/* A malloc'ed NUL-terminated copy of bytes[0..n), NULL when memory runs out. */
char* copy_bytes(const char* bytes, size_t n);

#endif
