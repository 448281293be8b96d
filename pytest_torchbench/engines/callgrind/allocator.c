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
 * One heap per thread: each thread allocates from its own free lists and its own arenas, and a
 * block goes onto the free lists of the thread that frees it (whoever allocated it). Why: with
 * one shared heap, another thread of the counted process (execnet's receiver thread in an xdist
 * worker, which wakes whenever the controller sends a message) allocated between the benchmark
 * thread's allocations at moments that depend on timing, so the benchmark thread was later given
 * other blocks from run to run, and address-dependent paths (glibc's memcmp checks whether its
 * operands cross a page) moved counts by 1-8 instructions per call in some runs. With one heap
 * per thread, the blocks a thread is given depend only on its own sequence of mallocs and frees,
 * and no lock is taken. A thread that exits leaves its heap to the next new thread (never to the
 * process's first thread, whose heap stays its own).
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
    uint64_t value; /* SMALL: class index | owner tag << 16; LARGE: mapping length; ALIGNED: offset back */
} header_t;

typedef struct free_block {
    struct free_block *next;
} free_block_t;

/* One thread's heap (mmap'd, so zeroed; never unmapped: an exited thread's heap is reused). */
typedef struct heap {
    free_block_t *free_lists[NUM_CLASSES];
    char *arena_cursor;
    char *arena_end;
    struct heap *next_spare;
    uint64_t tag;      /* stamped on its blocks: heap id << 32 | epoch */
    int isolated;      /* started an epoch: keeps only blocks it gave out in this epoch */
    uint64_t dropped;  /* bytes of blocks freed here but not reused (see free) */
} heap_t;

#define CLASS_BITS 16u
#define CLASS_MASK ((1u << CLASS_BITS) - 1u)

/* initial-exec: the slot lives in the static TLS block, so reading it never calls malloc. */
static __thread heap_t *my_heap __attribute__((tls_model("initial-exec")));
static heap_t *spare_heaps; /* heaps of exited threads, for new threads */
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static int exit_key_ready;
static int have_first_heap; /* the first heap made belongs to the first thread to allocate */
static uint64_t next_heap_id = 1;

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

/* A thread exits: its heap (free lists and the rest of its arena) waits for the next new thread. */
static void leave_heap(void *heap) {
    heap_t *h = heap;
    if (my_heap == h)
        my_heap = NULL; /* a later free/malloc in this thread's exit path takes a heap again */
    pthread_mutex_lock(&spare_lock);
    h->next_spare = spare_heaps;
    spare_heaps = h;
    pthread_mutex_unlock(&spare_lock);
}

static void make_exit_key(void) {
    exit_key_ready = pthread_key_create(&exit_key, leave_heap) == 0;
}

/* This thread's heap, taken on its first malloc or free. The process's first heap is always new,
 * and only later threads take spare heaps: the first thread's blocks depend on nothing else. */
static heap_t *take_heap(void) {
    heap_t *h = NULL;
    pthread_mutex_lock(&spare_lock);
    int first = !have_first_heap;
    have_first_heap = 1;
    if (!first && spare_heaps) {
        h = spare_heaps;
        spare_heaps = h->next_spare;
        h->next_spare = NULL;
    }
    pthread_mutex_unlock(&spare_lock);
    if (!h) {
        h = map_pages(page_round(sizeof(heap_t)));
        if (!h)
            return NULL;
        pthread_mutex_lock(&spare_lock);
        h->tag = (next_heap_id++ & 0xffffu) << 32; /* 48 bits: fits above the class index */
        pthread_mutex_unlock(&spare_lock);
    }
    pthread_once(&exit_key_once, make_exit_key);
    if (exit_key_ready)
        pthread_setspecific(exit_key, h);
    my_heap = h;
    return h;
}

static inline heap_t *this_heap(void) {
    heap_t *h = my_heap;
    return h ? h : take_heap();
}

static void *small_alloc(size_t n) {
    size_t index = class_index(n);
    header_t *h;
    heap_t *heap = this_heap();
    if (!heap) {
        errno = ENOMEM;
        return NULL;
    }
    free_block_t *b = heap->free_lists[index];
    if (b) {
        heap->free_lists[index] = b->next;
        h = (header_t *)((char *)b - HEADER);
        h->value = index | heap->tag << CLASS_BITS;
        return b;
    }
    size_t chunk = class_size(index) + HEADER;
    if ((size_t)(heap->arena_end - heap->arena_cursor) < chunk) {
        char *arena = map_pages(ARENA_SIZE);
        if (!arena) {
            errno = ENOMEM;
            return NULL;
        }
        heap->arena_cursor = arena;
        heap->arena_end = arena + ARENA_SIZE;
    }
    h = (header_t *)heap->arena_cursor;
    heap->arena_cursor += chunk;
    h->magic = MAGIC;
    h->kind = KIND_SMALL;
    h->value = index | heap->tag << CLASS_BITS;
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
    heap_t *heap = this_heap();
    if (!heap)
        return; /* no memory for a heap: the block is leaked, safely */
    size_t index = (size_t)(h->value & CLASS_MASK);
    if (heap->isolated && (h->value >> CLASS_BITS) != heap->tag) {
        /* Given out before this epoch, or by another thread: reusing it would make this thread's
         * later blocks depend on that history, so it is left unused. */
        heap->dropped += class_size(index) + HEADER;
        return;
    }
    free_block_t *b = p;
    b->next = heap->free_lists[index];
    heap->free_lists[index] = b;
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
    return class_size((size_t)(h->value & CLASS_MASK));
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

/* fork() while another thread holds the lock would leave the child's spare heaps locked. The
 * child's one thread keeps its own heap (my_heap is copied with the thread). */
static void before_fork(void) { pthread_mutex_lock(&spare_lock); }
static void after_fork(void) { pthread_mutex_unlock(&spare_lock); }
static void after_fork_child(void) { pthread_mutex_init(&spare_lock, NULL); }

__attribute__((constructor)) static void install_fork_handlers(void) {
    pthread_atfork(before_fork, after_fork, after_fork_child);
}

/*
 * Start a new epoch of the calling thread's heap, for the pytest-torchbench worker to call before
 * each test (through ctypes). From here on the thread gets blocks only from a fresh arena and from
 * blocks it gave out in this epoch, so which blocks (addresses) a test's allocations get depends on
 * the test alone, not on what ran before it in the process (other tests, the worker's start-up,
 * where timing decides how execnet's thread and this one interleave). Blocks from earlier epochs or
 * other threads that this thread frees are left unused; their bytes are counted (see
 * torchbench_alloc_dropped). Returns 0, or -1 without memory for the arena.
 */
int torchbench_alloc_new_epoch(void) {
    heap_t *heap = this_heap();
    if (!heap)
        return -1;
    char *arena = map_pages(ARENA_SIZE);
    if (!arena)
        return -1;
    memset(heap->free_lists, 0, sizeof(heap->free_lists));
    heap->arena_cursor = arena;
    heap->arena_end = arena + ARENA_SIZE;
    heap->tag = (heap->tag & ~(uint64_t)0xffffffffu) | ((heap->tag + 1) & 0xffffffffu);
    heap->isolated = 1;
    return 0;
}

/* Bytes the calling thread has freed but left unused since it started its first epoch. */
unsigned long long torchbench_alloc_dropped(void) {
    heap_t *heap = this_heap();
    return heap ? heap->dropped : 0;
}
