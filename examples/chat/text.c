#include "text.h"

#include <stdlib.h>
#include <string.h>

int text_reserve(text* t, size_t capacity) {
    char* grown;
    size_t cap;
    if (capacity + 1 <= t->cap) return 0;
    cap = t->cap ? t->cap : 64;
    while (cap < capacity + 1) cap *= 2;
    grown = (char*)realloc(t->data, cap);
    if (!grown) return -1;
    if (!t->data) grown[0] = '\0';
    t->data = grown;
    t->cap = cap;
    return 0;
}

int text_append(text* t, const char* bytes, size_t n) {
    if (text_reserve(t, t->len + n) != 0) return -1;
    if (n) memcpy(t->data + t->len, bytes, n);
    t->len += n;
    t->data[t->len] = '\0';
    return 0;
}

int text_append_str(text* t, const char* s) { return text_append(t, s, strlen(s)); }

void text_clear(text* t) {
    t->len = 0;
    if (t->data) t->data[0] = '\0';
}

void text_free(text* t) {
    free(t->data);
    t->data = NULL;
    t->len = t->cap = 0;
}

char* copy_bytes(const char* bytes, size_t n) {
    char* s = (char*)malloc(n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, bytes, n);
    s[n] = '\0';
    return s;
}
