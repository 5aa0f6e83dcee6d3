/* glm5rt-tokenize: check a tokenizer from the command line, through the public C API only.
 *
 *   glm5rt-tokenize [--no-special] DIR            < text   prints the ids as a JSON array
 *   glm5rt-tokenize --decode [--skip-special] DIR < ids    reads a JSON array of ids, prints the text
 *
 * DIR holds tokenizer.json (and optionally tokenizer_config.json). The text is read from stdin byte for
 * byte: a trailing newline is part of it (use printf '%s' to leave it out). Special tokens such as
 * <|user|> are recognised in the text unless --no-special is given. Exit status: 0 ok, 1 error, 2 usage. */
#include <glm5rt/glm5rt.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE* f) {
    fprintf(f,
            "usage: glm5rt-tokenize [--no-special] DIR < text       (prints token ids as a JSON array)\n"
            "       glm5rt-tokenize --decode [--skip-special] DIR < ids  (reads a JSON array of ids, prints text)\n");
}

/* Reads all of stdin; returns NULL (with a message) on failure. */
static char* read_stdin(size_t* out_len) {
    size_t cap = 1 << 16, len = 0;
    char* buf = (char*)malloc(cap);
    if (!buf) {
        fprintf(stderr, "glm5rt-tokenize: out of memory\n");
        return NULL;
    }
    for (;;) {
        size_t n;
        if (len == cap) {
            char* grown;
            cap *= 2;
            grown = (char*)realloc(buf, cap);
            if (!grown) {
                free(buf);
                fprintf(stderr, "glm5rt-tokenize: out of memory\n");
                return NULL;
            }
            buf = grown;
        }
        n = fread(buf + len, 1, cap - len, stdin);
        len += n;
        if (n == 0) break;
    }
    if (ferror(stdin)) {
        free(buf);
        fprintf(stderr, "glm5rt-tokenize: cannot read stdin: %s\n", strerror(errno));
        return NULL;
    }
    *out_len = len;
    return buf;
}

static int encode(glm5rt_tokenizer* tok, uint32_t flags) {
    size_t len = 0, n = 0, i;
    int32_t* ids;
    glm5rt_status st;
    char* text = read_stdin(&len);
    if (!text) return 1;
    st = glm5rt_tokenize(tok, text, len, flags, NULL, 0, &n);
    if (st != GLM5RT_OK) {
        fprintf(stderr, "glm5rt-tokenize: %s\n", glm5rt_last_error());
        free(text);
        return 1;
    }
    ids = (int32_t*)malloc((n ? n : 1) * sizeof *ids);
    if (!ids || glm5rt_tokenize(tok, text, len, flags, ids, n, &n) != GLM5RT_OK) {
        fprintf(stderr, "glm5rt-tokenize: %s\n", ids ? glm5rt_last_error() : "out of memory");
        free(ids);
        free(text);
        return 1;
    }
    putchar('[');
    for (i = 0; i < n; ++i) printf(i ? ", %d" : "%d", (int)ids[i]);
    printf("]\n");
    free(ids);
    free(text);
    return 0;
}

/* Parses "[1, 2, 3]" (whitespace anywhere). Returns 0 on success. */
static int parse_ids(const char* s, size_t len, int32_t** out, size_t* out_n) {
    size_t i = 0, n = 0, cap = 256;
    int32_t* ids = (int32_t*)malloc(cap * sizeof *ids);
    if (!ids) return -1;
#define SKIP_WS() while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i
    SKIP_WS();
    if (i >= len || s[i] != '[') goto bad;
    ++i;
    SKIP_WS();
    if (i < len && s[i] == ']') {
        ++i;
    } else {
        for (;;) {
            char num[24];
            size_t k = 0;
            long v;
            char* end;
            SKIP_WS();
            while (i < len && k + 1 < sizeof num && (s[i] == '-' || (s[i] >= '0' && s[i] <= '9'))) num[k++] = s[i++];
            num[k] = '\0';
            if (k == 0) goto bad;
            errno = 0;
            v = strtol(num, &end, 10);
            if (*end != '\0' || errno != 0 || v < INT32_MIN || v > INT32_MAX) goto bad;
            if (n == cap) {
                int32_t* grown = (int32_t*)realloc(ids, (cap *= 2) * sizeof *ids);
                if (!grown) goto bad;
                ids = grown;
            }
            ids[n++] = (int32_t)v;
            SKIP_WS();
            if (i < len && s[i] == ',') {
                ++i;
                continue;
            }
            if (i < len && s[i] == ']') {
                ++i;
                break;
            }
            goto bad;
        }
    }
    SKIP_WS();
    if (i != len) goto bad;
#undef SKIP_WS
    *out = ids;
    *out_n = n;
    return 0;
bad:
    free(ids);
    return -1;
}

static int decode(glm5rt_tokenizer* tok, uint32_t flags) {
    size_t len = 0, n = 0, out_len = 0;
    int32_t* ids = NULL;
    char* text;
    char* input = read_stdin(&len);
    if (!input) return 1;
    if (parse_ids(input, len, &ids, &n) != 0) {
        fprintf(stderr, "glm5rt-tokenize: --decode expects a JSON array of integer ids on stdin, e.g. [9685, 8375]\n");
        free(input);
        return 1;
    }
    free(input);
    if (glm5rt_detokenize(tok, ids, n, flags, NULL, 0, &out_len) != GLM5RT_OK) {
        fprintf(stderr, "glm5rt-tokenize: %s\n", glm5rt_last_error());
        free(ids);
        return 1;
    }
    text = (char*)malloc(out_len ? out_len : 1);
    if (!text || glm5rt_detokenize(tok, ids, n, flags, text, out_len, &out_len) != GLM5RT_OK) {
        fprintf(stderr, "glm5rt-tokenize: %s\n", text ? glm5rt_last_error() : "out of memory");
        free(text);
        free(ids);
        return 1;
    }
    fwrite(text, 1, out_len, stdout);
    free(text);
    free(ids);
    return 0;
}

int main(int argc, char** argv) {
    int do_decode = 0, no_special = 0, skip_special = 0, i, rc;
    const char* dir = NULL;
    glm5rt_tokenizer* tok = NULL;
    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--decode") == 0) do_decode = 1;
        else if (strcmp(argv[i], "--no-special") == 0) no_special = 1;
        else if (strcmp(argv[i], "--skip-special") == 0) skip_special = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "glm5rt-tokenize: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (dir == NULL) dir = argv[i];
        else {
            fprintf(stderr, "glm5rt-tokenize: more than one DIR given\n");
            usage(stderr);
            return 2;
        }
    }
    if (dir == NULL) {
        usage(stderr);
        return 2;
    }
    if ((do_decode && no_special) || (!do_decode && skip_special)) {
        fprintf(stderr, "glm5rt-tokenize: --no-special is for encoding, --skip-special for --decode\n");
        return 2;
    }
    if (glm5rt_tokenizer_load(dir, &tok) != GLM5RT_OK) {
        fprintf(stderr, "glm5rt-tokenize: cannot load a tokenizer from %s: %s\n", dir, glm5rt_last_error());
        return 1;
    }
    rc = do_decode ? decode(tok, skip_special ? GLM5RT_DETOKENIZE_SKIP_SPECIAL : 0)
                   : encode(tok, no_special ? 0 : GLM5RT_TOKENIZE_PARSE_SPECIAL);
    glm5rt_tokenizer_free(tok);
    return rc;
}
