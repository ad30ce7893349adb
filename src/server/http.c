/* server/http: libmicrohttpd glue — one thread per connection, bodies collected up to MF_SRV_MAX_BODY,
 * the API key checked, then routes.c answers; a streaming answer is sent chunk by chunk as the engine
 * thread appends SSE frames to its job. */
#include "server/server_impl.h"

#include "core/core.h"

#include <stdatomic.h>

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

struct mf_srv_http {
    struct MHD_Daemon *d;
    int port;
    mf_server *s;
};

typedef struct {
    char *body;
    size_t len, cap;
    bool too_large;
    size_t declared; /* Content-Length, 0 when absent */
} conn_state;

typedef struct {
    mf_server *s;
    mf_srv_job *job;
    int fd;
} stream_state;

static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

bool mf_srv_wait_job(mf_srv_job *j, int fd, bool for_stream) {
    pthread_mutex_lock(&j->mu);
    while (!j->done && !(for_stream && j->out_len > j->out_sent)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->done || (for_stream && j->out_len > j->out_sent)) break;
        pthread_mutex_unlock(&j->mu);
        bool gone = client_gone(fd);
        pthread_mutex_lock(&j->mu);
        if (gone) {
            j->cancelled = true;
            pthread_mutex_unlock(&j->mu);
            return false;
        }
    }
    pthread_mutex_unlock(&j->mu);
    return true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_state *st = cls;
    mf_srv_job *j = st->job;
    if (!mf_srv_wait_job(j, st->fd, true)) return MHD_CONTENT_READER_END_WITH_ERROR;
    pthread_mutex_lock(&j->mu);
    size_t avail = j->out_len - j->out_sent;
    if (avail == 0) { /* done and everything sent */
        pthread_mutex_unlock(&j->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = avail < max ? avail : max;
    memcpy(buf, j->out + j->out_sent, n);
    j->out_sent += n;
    pthread_mutex_unlock(&j->mu);
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    mf_srv_job_cancel(st->job); /* a no-op for the engine when the job is already done */
    mf_srv_job_unref(st->job);
    free(st);
}

static int client_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Constant time in the length of the expected key: no early exit on the first differing byte. */
static bool key_matches(const char *want, const char *got) {
    size_t wl = strlen(want), gl = got ? strlen(got) : 0;
    unsigned diff = (unsigned)(wl != gl);
    for (size_t i = 0; i < wl; i++) diff |= (unsigned char)want[i] ^ (unsigned char)(i < gl ? got[i] : 0);
    return diff == 0;
}

static bool is_open_route(const char *url) {
    return !strcmp(url, "/health") || !strcmp(url, "/v1/health") || !strcmp(url, "/models") ||
           !strcmp(url, "/v1/models");
}

static bool authorized(mf_server *s, struct MHD_Connection *c, const char *url) {
    if (!s->o.api_key || is_open_route(url)) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *key = NULL;
    if (h && !strncasecmp(h, "Bearer ", 7)) key = h + 7;
    if (!key) key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    return key_matches(s->o.api_key, key);
}

static enum MHD_Result send_answer(struct MHD_Connection *c, mf_srv_answer *a) {
    struct MHD_Response *r = MHD_create_response_from_buffer(a->len, a->body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(a->body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", a->ctype ? a->ctype : "application/json");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    if (a->hdr_name) MHD_add_response_header(r, a->hdr_name, a->hdr_value);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)a->status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_stream(mf_server *s, struct MHD_Connection *c, mf_srv_job *j, int fd) {
    stream_state *st = calloc(1, sizeof *st);
    if (!st) {
        mf_srv_job_cancel(j);
        mf_srv_job_unref(j);
        return MHD_NO;
    }
    st->s = s, st->job = j, st->fd = fd;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
    if (!r) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    mf_server *s = cls;
    conn_state *cs = *con_cls;
    if (!cs) { /* first call: headers only */
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        atomic_fetch_add(&s->http_active, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) cs->declared = (size_t)strtoull(cl, NULL, 10);
        if (cs->declared > MF_SRV_MAX_BODY) cs->too_large = true;
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        if (!cs->too_large) {
            if (cs->len + *upload_size > MF_SRV_MAX_BODY) {
                cs->too_large = true;
                free(cs->body);
                cs->body = NULL, cs->len = cs->cap = 0;
            } else {
                if (cs->len + *upload_size + 1 > cs->cap) {
                    size_t cap = (cs->len + *upload_size + 1) * 2;
                    if (cap > (size_t)MF_SRV_MAX_BODY + 1) cap = (size_t)MF_SRV_MAX_BODY + 1;
                    char *b = realloc(cs->body, cap);
                    if (!b) return MHD_NO;
                    cs->body = b, cs->cap = cap;
                }
                memcpy(cs->body + cs->len, upload, *upload_size);
                cs->len += *upload_size;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    mf_srv_answer a = {0};
    const char *label = "other";
    if (cs->too_large) {
        label = "too_large";
        mf_srv_answer_error(&a, 413, "invalid_request_error", "",
                            "the request body is larger than the server's limit of %d bytes", MF_SRV_MAX_BODY);
    } else if (!authorized(s, c, url)) {
        label = "unauthorized";
        mf_srv_answer_error(&a, 401, "authentication_error", "",
                            "invalid or missing API key: send it as 'Authorization: Bearer KEY'");
    } else {
        const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
        mf_srv_job *stream = NULL;
        int fd = client_fd(c);
        mf_srv_route(s, method, url, action, cs->body ? cs->body : "", cs->len, fd, &a, &stream, &label);
        if (stream) {
            mf_srv_metrics_request(s->m, label, 200);
            return send_stream(s, c, stream, fd);
        }
        if (a.status == 0) return MHD_NO; /* the client went away: nothing to answer */
    }
    mf_srv_metrics_request(s->m, label, a.status);
    return send_answer(c, &a);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    (void)c, (void)t;
    mf_server *s = cls;
    conn_state *cs = *con_cls;
    if (cs) {
        atomic_fetch_sub(&s->http_active, 1);
        free(cs->body);
        free(cs);
        *con_cls = NULL;
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    fprintf(stderr, "[server] http: ");
    vfprintf(stderr, fmt, ap);
}

int mf_srv_http_start(mf_server *s, mf_srv_http **out, mf_error *err) {
    *out = NULL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->o.port);
    int gai = getaddrinfo(s->o.host, port, &hints, &ai);
    if (gai) {
        hints.ai_flags = 0; /* a name such as "localhost" */
        gai = getaddrinfo(s->o.host, port, &hints, &ai);
    }
    if (gai)
        return mf_err(err, MF_E_INVAL, "--host '%s' is not an address this machine can listen on (%s)",
                             s->o.host, gai_strerror(gai));
    mf_srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        return mf_err(err, MF_E_NOMEM, "out of memory starting the HTTP server");
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)s->o.port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
                            NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)s->o.timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_CONNECTION_LIMIT, 512u, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        free(h);
        return mf_err(err, MF_E_IO,
                             "cannot listen on %s:%d (the port is in use or not allowed; pick another with --port)",
                             s->o.host, s->o.port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : s->o.port;
    h->s = s;
    *out = h;
    return 0;
}

int mf_srv_http_port(const mf_srv_http *h) { return h->port; }

void mf_srv_http_stop(mf_srv_http *h) {
    if (!h) return;
    /* every job is answered by now; let the connection threads finish sending (at most 5 s) before the
     * sockets are closed under them */
    for (int i = 0; i < 500 && atomic_load(&h->s->http_active) > 0; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(h->d);
    free(h);
}
