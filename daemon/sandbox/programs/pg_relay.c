/* svc's PostgreSQL relay: the byte-forwarding half of the db audit proxy (pg_proxy.py).

   Forwarding in Python costs a db client ~0.6x of its direct TPS even with no parsing at all
   (README "Speed"), so the hot path is here: one thread, epoll, recv -> send per chunk. Beside
   the byte stream the relay frames the protocol messages the audit reads (frontend Q P B E S F C,
   backend C s I E Z) and hands them to pg_proxy.py over a pipe, which turns them into db_write
   events exactly as it does for its own connections.

   What goes down the pipe is held per connection until the server's ReadyForQuery ends the
   client's cycle (a Query, a Sync or a FunctionCall), then decided:
   - released whole (frontend messages, then backend ones) when the cycle may matter to the
     audit: a write or transaction-control tag, or a transaction that ends with it (in a
     transaction before, idle after: the Session then flushes what it holds);
   - otherwise (reads, BEGIN, SET... with no error, the transaction status unchanged or opened)
     only its Parse/Bind/Close messages are passed on, which keeps pg_proxy.py's prepared-statement
     and portal names right, and the rest is dropped: for such a cycle pg_proxy.py's Session would
     emit nothing and end in the same state (its statement queue pops what the cycle pushed).
   A connection holding more than HOLD_LIMIT bytes of capture, one the server sent an
   ErrorResponse (after which it skips client messages up to the next Sync, so cycles can no longer
   be paired with ReadyForQuery by counting), or a stream that does not follow the protocol's order
   passes everything on from then on, as it arrives (what pg_proxy.py did for its own connections).

   Records are written in batches (CAPTURE_BATCH bytes or CAPTURE_DELAY_MS after the first one,
   whichever comes first): one wake-up of the Python reader per write cycle of a busy client
   costs it more CPU than the relay itself uses, on a machine where the database needs it.

   Pipe records: kind (1 byte: 'F' frontend bytes, 'B' backend bytes, 'X' closed), connection id
   (u32, big-endian), payload length (u32, big-endian), payload. When the pipe is full the relay
   keeps the records in memory up to CAPTURE_HIGH, then waits for the reader: no audit record is
   ever dropped, and a relay whose reader is gone exits.

   usage: pg_relay LISTEN_HOST LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT CAPTURE_FD
   Plain POSIX + Linux epoll; built with `cc -O2 -static` into the stock python image
   (daemon/sandbox/images.py). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF_SIZE (256 * 1024)
#define MAX_STARTUP 10000
#define HOLD_LIMIT (4u << 20)
#define CAPTURE_HIGH (64u << 20)
#define CAPTURE_BATCH (256u << 10)
#define CAPTURE_DELAY_MS 5
#define SSL_REQUEST 80877103u
#define GSSENC_REQUEST 80877104u
#define CANCEL_REQUEST 80877102u

typedef struct {
    unsigned char *p;
    size_t off, len, cap; /* live bytes are p[off .. len) */
} buf_t;

static void buf_add(buf_t *b, const void *d, size_t n) {
    if (!n) return;
    if (b->len + n > b->cap) {
        if (b->off) { /* reuse the consumed front first */
            memmove(b->p, b->p + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
        if (b->len + n > b->cap) {
            size_t cap = b->cap ? b->cap : 4096;
            while (cap < b->len + n) cap *= 2;
            unsigned char *p = realloc(b->p, cap);
            if (!p) { fputs("pg relay: out of memory\n", stderr); exit(2); }
            b->p = p;
            b->cap = cap;
        }
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static size_t buf_size(const buf_t *b) { return b->len - b->off; }
static unsigned char *buf_data(const buf_t *b) { return b->p + b->off; }
static void buf_consume(buf_t *b, size_t n) {
    b->off += n;
    if (b->off >= b->len) b->off = b->len = 0;
}
static void buf_free(buf_t *b) { free(b->p); memset(b, 0, sizeof *b); }

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

/* --- the capture pipe ----------------------------------------------------------------------- */

static int cap_fd = -1;
static buf_t cap;

static void emit(char kind, uint32_t id, const unsigned char *d, size_t n) {
    unsigned char h[9];
    h[0] = (unsigned char)kind;
    put_be32(h + 1, id);
    put_be32(h + 5, (uint32_t)n);
    buf_add(&cap, h, 9);
    buf_add(&cap, d, n);
}

/* Write what the pipe takes now; with `wait`, all of it. Exits when the reader is gone. */
static void cap_flush(int wait) {
    while (buf_size(&cap)) {
        ssize_t w = write(cap_fd, buf_data(&cap), buf_size(&cap));
        if (w > 0) { buf_consume(&cap, (size_t)w); continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) {
            if (!wait) return;
            struct pollfd pfd = {cap_fd, POLLOUT, 0};
            poll(&pfd, 1, -1);
            continue;
        }
        fprintf(stderr, "pg relay: the audit reader is gone (%s); stopping\n", strerror(errno));
        exit(3);
    }
}

/* --- connections ---------------------------------------------------------------------------- */

typedef struct {
    unsigned char hdr[5];
    int hdr_len;
    uint32_t body_left;
    int keep;
    size_t start; /* offset of the kept message from its hold buffer's first live byte */
} framer_t;

struct conn;
typedef struct side {
    int fd, is_client, eof;
    uint32_t mask; /* epoll events registered */
    struct conn *c;
    struct side *peer;
    buf_t out; /* bytes waiting to be written to this side */
    framer_t fr;
} side_t;

typedef struct conn {
    uint32_t id;
    side_t cl, sv;
    int connected, in_startup, passthrough, capture_all, closed;
    buf_t startup;
    buf_t front;            /* kept frontend messages of the queued cycles, then the open one */
    uint32_t *cycles;       /* byte length of each ended, unanswered cycle, oldest first */
    size_t ncycles, cycles_cap, queued; /* queued: the sum of cycles[] */
    buf_t back;             /* kept backend messages of the oldest cycle */
    int matters;            /* the oldest cycle had a write or transaction-control tag */
    char status;            /* the last ReadyForQuery status, 0 before the first */
    struct conn *prev, *next; /* the live connections */
    struct conn *next_dead;
} conn_t;

static int ep;
static uint32_t next_id = 1;
static conn_t *live;
static conn_t *dead; /* closed this round, freed after it (events may still name them) */
static char listen_marker, cap_marker;

static const char *const AUDITED[] = {"INSERT", "UPDATE", "DELETE", "MERGE", "COPY", "TRUNCATE",
                                      "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"};

static int audited_tag(const unsigned char *body, uint32_t n) {
    uint32_t w = 0;
    while (w < n && body[w] != ' ' && body[w] != 0) w++;
    for (size_t i = 0; i < sizeof AUDITED / sizeof *AUDITED; i++)
        if (strlen(AUDITED[i]) == w && !strncasecmp((const char *)body, AUDITED[i], w)) return 1;
    return 0;
}

/* Everything held goes down the pipe; from now on every message does, as it arrives. */
static void release_all(conn_t *c) {
    if (buf_size(&c->front)) emit('F', c->id, buf_data(&c->front), buf_size(&c->front));
    if (buf_size(&c->back)) emit('B', c->id, buf_data(&c->back), buf_size(&c->back));
    c->front.off = c->front.len = 0;
    c->back.off = c->back.len = 0;
    c->ncycles = c->queued = 0;
    c->capture_all = 1;
    c->cl.fr.start = c->sv.fr.start = 0;
}

/* Only the Parse/Bind/Close messages of a dropped cycle: the names pg_proxy.py tracks. */
static void emit_names(conn_t *c, const unsigned char *d, size_t n) {
    size_t hdr = buf_size(&cap);
    unsigned char h[9] = {'F'};
    put_be32(h + 1, c->id);
    size_t total = 0;
    for (size_t pos = 0; pos + 5 <= n;) {
        size_t len = 1 + (size_t)be32(d + pos + 1);
        if (len < 5) len = 5;
        if (pos + len > n) len = n - pos;
        unsigned char t = d[pos];
        if (t == 'P' || t == 'B' || t == 'C') {
            if (!total) buf_add(&cap, h, 9);
            buf_add(&cap, d + pos, len);
            total += len;
        }
        pos += len;
    }
    if (total) put_be32(buf_data(&cap) + hdr + 5, (uint32_t)total);
}

static void ready_for_query(conn_t *c, char status) {
    char before = c->status;
    c->status = status;
    if (!c->ncycles) {
        if (buf_size(&c->front)) { release_all(c); return; } /* answered before asked: not the protocol */
        if (buf_size(&c->back)) emit('B', c->id, buf_data(&c->back), buf_size(&c->back));
    } else {
        size_t head = c->cycles[0];
        if (c->matters || (status == 'I' && before != 'I')) {
            emit('F', c->id, buf_data(&c->front), head);
            emit('B', c->id, buf_data(&c->back), buf_size(&c->back));
        } else {
            emit_names(c, buf_data(&c->front), head);
        }
        buf_consume(&c->front, head);
        c->cl.fr.start = c->cl.fr.start >= head ? c->cl.fr.start - head : 0;
        memmove(c->cycles, c->cycles + 1, (c->ncycles - 1) * sizeof *c->cycles);
        c->ncycles--;
        c->queued -= head;
    }
    c->back.off = c->back.len = 0;
    c->matters = 0;
}

static void front_message(conn_t *c, size_t start) {
    unsigned char t = buf_data(&c->front)[start];
    if (t != 'Q' && t != 'S' && t != 'F') return;
    if (c->ncycles == c->cycles_cap) {
        c->cycles_cap = c->cycles_cap ? c->cycles_cap * 2 : 8;
        c->cycles = realloc(c->cycles, c->cycles_cap * sizeof *c->cycles);
        if (!c->cycles) { fputs("pg relay: out of memory\n", stderr); exit(2); }
    }
    c->cycles[c->ncycles++] = (uint32_t)(buf_size(&c->front) - c->queued);
    c->queued = buf_size(&c->front);
}

static void back_message(conn_t *c, size_t start) {
    const unsigned char *m = buf_data(&c->back) + start;
    uint32_t n = (uint32_t)(buf_size(&c->back) - start - 5);
    if (m[0] == 'C' && audited_tag(m + 5, n)) c->matters = 1;
    else if (m[0] == 'E') release_all(c); /* the server may now skip client messages up to a Sync: cycles
                                             no longer pair with ReadyForQuery by counting */
    else if (m[0] == 'Z') ready_for_query(c, n ? (char)m[5] : 0);
}

static int wanted(int front, unsigned char t) {
    return front ? (t == 'Q' || t == 'P' || t == 'B' || t == 'E' || t == 'S' || t == 'F' || t == 'C')
                 : (t == 'C' || t == 's' || t == 'I' || t == 'E' || t == 'Z');
}

/* Keep the audit's messages of one direction's chunk in the connection's hold buffer. */
static void frame(conn_t *c, int front, const unsigned char *d, size_t n) {
    framer_t *f = front ? &c->cl.fr : &c->sv.fr;
    buf_t *hold = front ? &c->front : &c->back;
    while (n) {
        if (f->hdr_len < 5) {
            size_t take = 5 - (size_t)f->hdr_len;
            if (take > n) take = n;
            memcpy(f->hdr + f->hdr_len, d, take);
            f->hdr_len += (int)take;
            d += take;
            n -= take;
            if (f->hdr_len < 5) break;
            uint32_t len = be32(f->hdr + 1);
            f->body_left = len >= 4 ? len - 4 : 0;
            f->keep = wanted(front, f->hdr[0]);
            if (f->keep) {
                f->start = buf_size(hold);
                buf_add(hold, f->hdr, 5);
            }
        } else {
            size_t take = f->body_left < n ? f->body_left : n;
            if (f->keep) buf_add(hold, d, take);
            f->body_left -= (uint32_t)take;
            d += take;
            n -= take;
        }
        if (f->hdr_len == 5 && !f->body_left) {
            f->hdr_len = 0;
            if (f->keep && !c->capture_all) (front ? front_message : back_message)(c, f->start);
        }
    }
    if (c->capture_all) {
        if (buf_size(hold)) emit(front ? 'F' : 'B', c->id, buf_data(hold), buf_size(hold));
        hold->off = hold->len = 0;
        f->start = 0;
    } else if (buf_size(&c->front) + buf_size(&c->back) > HOLD_LIMIT) {
        release_all(c);
    }
}

/* --- the event loop ------------------------------------------------------------------------- */

static struct addrinfo *upstream_ai;
static time_t upstream_at;
static const char *up_host, *up_port;

static void update(side_t *s) {
    if (s->c->closed) return;
    uint32_t m = 0;
    if (!s->eof && !buf_size(&s->peer->out)) m |= EPOLLIN | EPOLLRDHUP;
    if (buf_size(&s->out) || (!s->is_client && !s->c->connected)) m |= EPOLLOUT;
    if (m != s->mask) {
        struct epoll_event ev = {.events = m, .data.ptr = s};
        epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &ev);
        s->mask = m;
    }
}

static void close_conn(conn_t *c) {
    if (c->closed) return;
    c->closed = 1;
    if (c->prev) c->prev->next = c->next;
    else live = c->next;
    if (c->next) c->next->prev = c->prev;
    close(c->cl.fd);
    close(c->sv.fd);
    if (!c->passthrough && !c->in_startup) {
        if (buf_size(&c->front)) emit('F', c->id, buf_data(&c->front), buf_size(&c->front));
        if (buf_size(&c->back)) emit('B', c->id, buf_data(&c->back), buf_size(&c->back));
        emit('X', c->id, NULL, 0);
    }
    c->next_dead = dead;
    dead = c;
}

static void free_conn(conn_t *c) {
    buf_free(&c->cl.out);
    buf_free(&c->sv.out);
    buf_free(&c->startup);
    buf_free(&c->front);
    buf_free(&c->back);
    free(c->cycles);
    free(c);
}

/* Write to `s` now if possible; keep the rest (its peer stops reading until it is written). */
static void send_to(side_t *s, const unsigned char *d, size_t n) {
    if (!buf_size(&s->out) && (s->is_client || s->c->connected)) {
        while (n) {
            ssize_t w = send(s->fd, d, n, MSG_NOSIGNAL);
            if (w > 0) { d += w; n -= (size_t)w; continue; }
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && errno == EAGAIN) break;
            close_conn(s->c);
            return;
        }
        if (!n) return;
    }
    buf_add(&s->out, d, n);
    update(s);
    update(s->peer);
}

static void startup(conn_t *c) {
    buf_t *b = &c->startup;
    while (c->in_startup && buf_size(b) >= 8) {
        unsigned char *p = buf_data(b);
        uint32_t len = be32(p);
        if (len < 8 || len > MAX_STARTUP) { close_conn(c); return; }
        if (buf_size(b) < len) return;
        uint32_t code = be32(p + 4);
        if (code == SSL_REQUEST || code == GSSENC_REQUEST) {
            send_to(&c->cl, (const unsigned char *)"N", 1); /* no TLS through the proxy: clear text */
            buf_consume(b, len);
            continue;
        }
        c->in_startup = 0;
        c->passthrough = code == CANCEL_REQUEST;
        send_to(&c->sv, p, len);
        buf_consume(b, len);
    }
    if (!c->in_startup && buf_size(b) && !c->closed) {
        send_to(&c->sv, buf_data(b), buf_size(b));
        if (!c->passthrough) frame(c, 1, buf_data(b), buf_size(b));
        buf_consume(b, buf_size(b));
    }
}

static unsigned char rbuf[RBUF_SIZE];

static void readable(side_t *s) {
    conn_t *c = s->c;
    ssize_t n = recv(s->fd, rbuf, sizeof rbuf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
        s->eof = 1;
        if (!buf_size(&s->peer->out)) shutdown(s->peer->fd, SHUT_WR);
        if (s->peer->eof) close_conn(c);
        else update(s);
        return;
    }
    if (s->is_client && c->in_startup) {
        buf_add(&c->startup, rbuf, (size_t)n);
        startup(c);
        return;
    }
    send_to(s->peer, rbuf, (size_t)n);
    if (!c->passthrough && !c->closed) frame(c, s->is_client, rbuf, (size_t)n);
}

static void writable(side_t *s) {
    conn_t *c = s->c;
    if (!s->is_client && !c->connected) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
            fprintf(stderr, "pg relay: cannot reach %s:%s: %s\n", up_host, up_port, strerror(err));
            close_conn(c);
            return;
        }
        c->connected = 1;
    }
    while (buf_size(&s->out)) {
        ssize_t w = send(s->fd, buf_data(&s->out), buf_size(&s->out), MSG_NOSIGNAL);
        if (w > 0) { buf_consume(&s->out, (size_t)w); continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) break;
        close_conn(c);
        return;
    }
    if (!buf_size(&s->out) && s->peer->eof) shutdown(s->fd, SHUT_WR);
    update(s);
    update(s->peer);
}

static struct addrinfo *upstream(void) {
    time_t now = time(NULL);
    if (upstream_ai && now - upstream_at < 5) return upstream_ai;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(up_host, up_port, &hints, &ai);
    if (rc) {
        fprintf(stderr, "pg relay: cannot resolve %s: %s\n", up_host, gai_strerror(rc));
        return NULL;
    }
    if (upstream_ai) freeaddrinfo(upstream_ai);
    upstream_ai = ai;
    upstream_at = now;
    return ai;
}

static void add_side(side_t *s) {
    struct epoll_event ev = {.events = 0, .data.ptr = s};
    epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
    s->mask = 0;
    update(s);
}

static void accept_all(int lfd) {
    for (;;) {
        int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno != EAGAIN && errno != EINTR) fprintf(stderr, "pg relay: accept failed: %s\n", strerror(errno));
            return;
        }
        struct addrinfo *ai = upstream();
        int sfd = ai ? socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) : -1;
        if (sfd < 0) { close(cfd); continue; }
        int one = 1;
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int rc = connect(sfd, ai->ai_addr, ai->ai_addrlen);
        if (rc < 0 && errno != EINPROGRESS) {
            fprintf(stderr, "pg relay: cannot reach %s:%s: %s\n", up_host, up_port, strerror(errno));
            close(cfd);
            close(sfd);
            continue;
        }
        conn_t *c = calloc(1, sizeof *c);
        if (!c) { fputs("pg relay: out of memory\n", stderr); exit(2); }
        c->id = next_id++;
        c->in_startup = 1;
        c->connected = rc == 0;
        c->cl = (side_t){.fd = cfd, .is_client = 1, .c = c, .peer = &c->sv};
        c->sv = (side_t){.fd = sfd, .is_client = 0, .c = c, .peer = &c->cl};
        c->next = live;
        if (live) live->prev = c;
        live = c;
        add_side(&c->cl);
        add_side(&c->sv);
    }
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static volatile sig_atomic_t stopping;
static void on_signal(int sig) { (void)sig; stopping = 1; }

int main(int argc, char **argv) {
    if (argc != 6) {
        fputs("usage: pg_relay LISTEN_HOST LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT CAPTURE_FD\n", stderr);
        return 64;
    }
    up_host = argv[3];
    up_port = argv[4];
    cap_fd = atoi(argv[5]);
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the audit reader's process gone: so is the relay */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    fcntl(cap_fd, F_SETFL, fcntl(cap_fd, F_GETFL) | O_NONBLOCK);

    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *la = NULL;
    int rc = getaddrinfo(argv[1], argv[2], &hints, &la);
    if (rc) { fprintf(stderr, "pg relay: bad listen address: %s\n", gai_strerror(rc)); return 1; }
    int lfd = socket(la->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, la->ai_addr, la->ai_addrlen) || listen(lfd, 512)) {
        fprintf(stderr, "pg relay: cannot listen on %s:%s: %s\n", argv[1], argv[2], strerror(errno));
        return 1;
    }
    freeaddrinfo(la);
    ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &listen_marker};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    struct epoll_event cev = {.events = 0, .data.ptr = &cap_marker};
    epoll_ctl(ep, EPOLL_CTL_ADD, cap_fd, &cev);
    int cap_waiting = 0;
    long long cap_since = 0; /* when the unwritten records began to wait */
    fprintf(stderr, "svc pg relay listening on %s:%s, upstream %s:%s\n", argv[1], argv[2], up_host, up_port);

    struct epoll_event evs[256];
    while (!stopping) {
        int timeout = -1;
        if (cap_since) {
            long long left = cap_since + CAPTURE_DELAY_MS - now_ms();
            timeout = left > 0 ? (int)left + 1 : 0;
        }
        int n = epoll_wait(ep, evs, 256, timeout);
        if (n < 0 && errno == EINTR) continue;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &listen_marker) { accept_all(lfd); continue; }
            if (p == &cap_marker) {
                if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
                    fputs("pg relay: the audit reader is gone; stopping\n", stderr);
                    return 3;
                }
                continue;
            }
            side_t *s = p;
            if (s->c->closed) continue;
            uint32_t e = evs[i].events;
            if (e & EPOLLOUT) writable(s);
            if ((e & (EPOLLIN | EPOLLRDHUP)) && !s->c->closed) readable(s);
            if ((e & (EPOLLHUP | EPOLLERR)) && !s->c->closed) {
                for (int k = 0; k < 64 && !s->c->closed && !s->eof; k++) readable(s); /* what is still buffered */
                close_conn(s->c);
            }
        }
        while (dead) {
            conn_t *c = dead;
            dead = c->next_dead;
            free_conn(c);
        }
        if (buf_size(&cap) && !cap_since) cap_since = now_ms();
        int due = buf_size(&cap) >= CAPTURE_BATCH || (cap_since && now_ms() - cap_since >= CAPTURE_DELAY_MS);
        if (due) cap_flush(buf_size(&cap) > CAPTURE_HIGH);
        if (!buf_size(&cap)) cap_since = 0;
        int want = due && buf_size(&cap); /* the pipe is full: wake up when it drains */
        if (want != cap_waiting) {
            struct epoll_event ev = {.events = want ? EPOLLOUT : 0, .data.ptr = &cap_marker};
            epoll_ctl(ep, EPOLL_CTL_MOD, cap_fd, &ev);
            cap_waiting = want;
        }
    }
    while (live) close_conn(live); /* what each connection holds goes to the audit first */
    cap_flush(1);
    return 0;
}
