/*
 * A tiny deterministic malloc for the Callgrind-counted process (LD_PRELOAD).
 *
 * Why: with glibc malloc, the instructions spent inside the allocator depend on the heap's
 * history (which statements ran before, how long the environment is), which moved counts of
 * small torch statements by up to ~1%. Here every request is served from a per-size-class LIFO
 * free list or a bump pointer in mmap-backed arenas, so the cost of an allocation is a handful
 * of instructions that does not depend on history. Combined with PYTHONMALLOC=malloc it made
 * counts independent of order and selection to ~0.06%.
 *
 * It is not meant to be fast or memory-frugal in general: memory is never returned to the
 * system except for large blocks (>= LARGE_THRESHOLD), which go straight to mmap/munmap.
 *
 * Build with: gcc -O2 -fPIC -shared -fno-builtin (without -fno-builtin gcc may turn
 * malloc+memset into a call to calloc, i.e. infinite recursion).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HEADER 16u                      /* keeps user pointers 16-byte aligned */
#define MAGIC 0x7462616cu               /* "tbal": recognises our blocks */
#define KIND_SMALL 1u
#define KIND_LARGE 2u
#define KIND_ALIGNED 3u                 /* a header in front of an aligned pointer */
#define LARGE_THRESHOLD ((size_t)1 << 20)
#define ARENA_SIZE ((size_t)8 << 20)
#define SMALL_LIMIT 1024u
#define NUM_SMALL (SMALL_LIMIT / 16u)   /* classes 16, 32, ..., 1024 */
#define NUM_CLASSES (NUM_SMALL + 4u * 10u) /* then 4 steps per power of two up to 1 MiB */

typedef struct header {
    uint32_t magic;
    uint32_t kind;
    uint64_t value; /* SMALL: class index; LARGE: mapping length; ALIGNED: offset back */
} header_t;

typedef struct free_block {
    struct free_block *next;
} free_block_t;

static free_block_t *free_lists[NUM_CLASSES];
static char *arena_cursor;
static char *arena_end;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t class_index(size_t n) {
    if (n <= SMALL_LIMIT)
        return n == 0 ? 0 : (n - 1) / 16u;
    /* n in (2^p, 2^(p+1)], p >= 10: four equal steps of 2^(p-2). */
    size_t m = n - 1;
    unsigned p = 63u - (unsigned)__builtin_clzll((unsigned long long)m);
    size_t step = (size_t)(m >> (p - 2)) - 4u; /* 0..3 */
    return NUM_SMALL + (p - 10u) * 4u + step;
}

static size_t class_size(size_t index) {
    if (index < NUM_SMALL)
        return (index + 1) * 16u;
    size_t k = index - NUM_SMALL;
    unsigned p = 10u + (unsigned)(k / 4u);
    return ((size_t)1 << p) + (k % 4u + 1u) * ((size_t)1 << (p - 2));
}

static void *map_pages(size_t length) {
    void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static size_t page_round(size_t n) {
    size_t page = 4096u;
    return (n + page - 1) & ~(page - 1);
}

static void *large_alloc(size_t n) {
    if (n > SIZE_MAX - HEADER - 4096u) {
        errno = ENOMEM;
        return NULL;
    }
    size_t length = page_round(n + HEADER);
    header_t *h = map_pages(length);
    if (!h) {
        errno = ENOMEM;
        return NULL;
    }
    h->magic = MAGIC;
    h->kind = KIND_LARGE;
    h->value = length;
    return (char *)h + HEADER;
}

static void *small_alloc(size_t n) {
    size_t index = class_index(n);
    header_t *h;
    pthread_mutex_lock(&lock);
    free_block_t *b = free_lists[index];
    if (b) {
        free_lists[index] = b->next;
        pthread_mutex_unlock(&lock);
        return b;
    }
    size_t chunk = class_size(index) + HEADER;
    if ((size_t)(arena_end - arena_cursor) < chunk) {
        char *arena = map_pages(ARENA_SIZE);
        if (!arena) {
            pthread_mutex_unlock(&lock);
            errno = ENOMEM;
            return NULL;
        }
        arena_cursor = arena;
        arena_end = arena + ARENA_SIZE;
    }
    h = (header_t *)arena_cursor;
    arena_cursor += chunk;
    pthread_mutex_unlock(&lock);
    h->magic = MAGIC;
    h->kind = KIND_SMALL;
    h->value = index;
    return (char *)h + HEADER;
}

static header_t *header_of(void *p) {
    header_t *h = (header_t *)((char *)p - HEADER);
    return h->magic == MAGIC ? h : NULL;
}

void *malloc(size_t n) {
    return n >= LARGE_THRESHOLD ? large_alloc(n) : small_alloc(n);
}

void free(void *p) {
    if (!p)
        return;
    header_t *h = header_of(p);
    if (!h)
        return; /* not ours (e.g. from the loader before we were bound): leak it safely */
    if (h->kind == KIND_ALIGNED) {
        free((char *)p - h->value);
        return;
    }
    if (h->kind == KIND_LARGE) {
        munmap(h, (size_t)h->value);
        return;
    }
    free_block_t *b = p;
    pthread_mutex_lock(&lock);
    b->next = free_lists[h->value];
    free_lists[h->value] = b;
    pthread_mutex_unlock(&lock);
}

size_t malloc_usable_size(void *p) {
    if (!p)
        return 0;
    header_t *h = header_of(p);
    if (!h)
        return 0;
    if (h->kind == KIND_ALIGNED) {
        void *base = (char *)p - h->value;
        return malloc_usable_size(base) - (size_t)h->value;
    }
    if (h->kind == KIND_LARGE)
        return (size_t)h->value - HEADER;
    return class_size((size_t)h->value);
}

void *calloc(size_t count, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = malloc(n);
    if (p && n < LARGE_THRESHOLD) /* fresh mappings are already zero */
        memset(p, 0, n);
    return p;
}

void *realloc(void *p, size_t n) {
    if (!p)
        return malloc(n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    size_t old = malloc_usable_size(p);
    if (header_of(p) && n <= old)
        return p;
    void *q = malloc(n);
    if (!q)
        return NULL;
    if (header_of(p))
        memcpy(q, p, old < n ? old : n);
    free(p);
    return q;
}

void *reallocarray(void *p, size_t count, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n);
}

void *memalign(size_t alignment, size_t n) {
    if (alignment <= HEADER)
        return malloc(n);
    if (alignment & (alignment - 1)) {
        errno = EINVAL;
        return NULL;
    }
    if (n > SIZE_MAX - alignment - HEADER) {
        errno = ENOMEM;
        return NULL;
    }
    char *base = malloc(n + alignment + HEADER);
    if (!base)
        return NULL;
    uintptr_t start = (uintptr_t)base + HEADER;
    uintptr_t aligned = (start + alignment - 1) & ~(uintptr_t)(alignment - 1);
    header_t *h = (header_t *)(aligned - HEADER);
    h->magic = MAGIC;
    h->kind = KIND_ALIGNED;
    h->value = aligned - (uintptr_t)base;
    return (void *)aligned;
}

int posix_memalign(void **out, size_t alignment, size_t n) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)))
        return EINVAL;
    void *p = memalign(alignment, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t n) {
    return memalign(alignment, n);
}

void *valloc(size_t n) {
    return memalign(4096u, n);
}

void *pvalloc(size_t n) {
    return memalign(4096u, page_round(n ? n : 1));
}

/* fork() while another thread holds the lock would leave the child's allocator locked. */
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) { pthread_mutex_init(&lock, NULL); }

__attribute__((constructor)) static void install_fork_handlers(void) {
    pthread_atfork(before_fork, after_fork, after_fork_child);
}
