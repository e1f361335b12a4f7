/*
 * hop-recv: AMQP 1.0 load generator (receiving side) for the Hop benchmarks.
 *
 *   hop-recv URL ADDRESS [--count N] [--credit W] [--listen]
 *                        [--timeout SECS] [--idle SECS] [--no-sasl]
 *                        [--release-every K]
 *
 * Receives N messages, accepting (and settling) each one; with
 * --release-every K it releases every Kth delivery instead (not counted
 * among the N, nor in the latencies).  The last 8 bytes
 * of every delivery are the sender's CLOCK_MONOTONIC timestamp in
 * nanoseconds, little-endian; latency = arrival time - timestamp.
 *
 * By default it connects to URL and attaches a receiving link from ADDRESS.
 * With --listen it listens on URL instead, prints "listening" once it does,
 * accepts one connection and takes the first sending link its peer attaches.
 *
 * Prints one JSON line on stdout at the end; exit 0 on success, 1 on
 * timeout or connection failure (reason on stderr), 2 on bad usage.
 */
#include "common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/listener.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/terminus.h>

static const char *prog = "hop-recv";

typedef struct {
    /* configuration */
    char addr[600];
    char host[512];
    const char *address;
    uint64_t count;
    uint64_t window;
    bool listen;
    double timeout_s;
    double idle_s;            /* 0: wait for every message */
    bool no_sasl;
    const char *node;         /* --node: the router node to be served by */
    char node_seen[128];      /* the node that served it */
    bool tls;     /* amqps:// */
    uint32_t max_frame;       /* 0: proton's default (no limit) */
    uint64_t release_every;   /* 0: accept everything */

    /* proton */
    pn_proactor_t *proactor;
    pn_listener_t *listener;
    pn_connection_t *conn;
    pn_link_t *link;

    /* the delivery being read (deliveries on a link arrive one at a time) */
    char *buf;
    size_t cap;
    size_t have;

    /* progress */
    uint64_t received;
    uint64_t arrived;         /* deliveries, released ones too */
    uint64_t released;
    uint64_t granted;         /* total credit issued */
    uint64_t *latency;        /* ns, one per message */
    uint64_t first, last;     /* arrival of first and last message */
    uint64_t deadline;
    uint64_t short_msgs;      /* deliveries under 8 bytes (no timestamp) */
    uint64_t bad_stamps;      /* timestamps in the future: not ours */

    bool done;
    bool closing;
    bool remote_closed;
    bool failed;
    bool giving_up;           /* timed out: closing, with a short grace period */
    bool finished;
} receiver_t;

static void usage(void)
{
    fprintf(stderr,
            "usage: %s URL ADDRESS [--count N] [--credit W] [--listen] [--timeout SECS] [--idle SECS]\n"
            "                [--no-sasl] [--max-frame BYTES]\n"
            "  URL        amqp://HOST:PORT or HOST:PORT\n"
            "  --count    stop after N messages (default 100000)\n"
            "  --credit   credit window (default 1000), topped up when half is used\n"
            "  --listen   listen on URL and take the link a sender attaches\n"
            "  --timeout  give up after SECS seconds (default 60)\n"
            "  --idle     stop, as done, once SECS pass with no message after the\n"
            "             first (for a router that may drop pre-settled messages)\n"
            "  --no-sasl  skip the SASL layer when connecting (default: SASL ANONYMOUS)\n"
            "  --node     exit 3 unless the router's container id is NAME (connecting)\n"
            "  --max-frame  largest frame the peer may send us (default: no limit)\n"
            "  --release-every  release every Kth delivery instead of accepting it\n",
            prog);
    exit(2);
}

static void parse_args(receiver_t *r, int argc, char **argv)
{
    const char *positional[2];
    int npos = 0;
    r->count = 100000;
    r->window = 1000;
    r->timeout_s = 60.0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage();
        } else if (strcmp(a, "--listen") == 0) {
            r->listen = true;
        } else if (strcmp(a, "--no-sasl") == 0) {
            r->no_sasl = true;
        } else if (hop_opt_value(prog, argc, argv, &i, "--node", &v)) {
            r->node = v;
        } else if (hop_opt_value(prog, argc, argv, &i, "--count", &v)) {
            r->count = hop_parse_u64(prog, "--count", v);
        } else if (hop_opt_value(prog, argc, argv, &i, "--credit", &v)) {
            r->window = hop_parse_u64(prog, "--credit", v);
        } else if (hop_opt_value(prog, argc, argv, &i, "--max-frame", &v)) {
            uint64_t mf = hop_parse_u64(prog, "--max-frame", v);
            if (mf != 0 && (mf < 512 || mf > UINT32_MAX)) {
                fprintf(stderr, "%s: --max-frame must be 0 or 512..4294967295\n", prog);
                exit(2);
            }
            r->max_frame = (uint32_t)mf;
        } else if (hop_opt_value(prog, argc, argv, &i, "--release-every", &v)) {
            r->release_every = hop_parse_u64(prog, "--release-every", v);
        } else if (hop_opt_value(prog, argc, argv, &i, "--timeout", &v)) {
            r->timeout_s = hop_parse_double(prog, "--timeout", v);
        } else if (hop_opt_value(prog, argc, argv, &i, "--idle", &v)) {
            r->idle_s = hop_parse_double(prog, "--idle", v);
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "%s: unknown option '%s'\n", prog, a);
            usage();
        } else if (npos < 2) {
            positional[npos++] = a;
        } else {
            fprintf(stderr, "%s: unexpected argument '%s'\n", prog, a);
            usage();
        }
    }
    if (npos != 2) {
        usage();
    }
    if (r->count == 0) {
        fprintf(stderr, "%s: --count must be at least 1\n", prog);
        exit(2);
    }
    if (r->window == 0 || r->window > 0x7fffffff) {
        fprintf(stderr, "%s: --credit must be between 1 and 2147483647\n", prog);
        exit(2);
    }
    if (!hop_parse_url(prog, positional[0], r->addr, sizeof r->addr,
                       r->host, sizeof r->host, &r->tls)) {
        exit(2);
    }
    r->address = positional[1];
}

static void close_connection(receiver_t *r)
{
    if (r->closing || r->conn == NULL) {
        return;
    }
    r->closing = true;
    if (r->link != NULL) {
        pn_link_close(r->link);
        pn_session_close(pn_link_session(r->link));
    }
    pn_connection_close(r->conn);
}

static void fail(receiver_t *r)
{
    r->failed = true;
    close_connection(r);
}

/* Keep the credit window topped up: when at most half of it is left, bring
 * it back to the full window with one flow, never issuing more credit in
 * total than the messages still wanted. */
static void top_up(receiver_t *r, pn_link_t *l)
{
    /* Released deliveries took credit without counting among the N. */
    uint64_t wanted = r->count + r->released;
    if (r->granted >= wanted) {
        return;
    }
    int credit = pn_link_credit(l);
    if (credit < 0) {
        credit = 0;
    }
    if ((uint64_t)credit > r->window / 2) {
        return;
    }
    uint64_t add = r->window - (uint64_t)credit;
    if (add > wanted - r->granted) {
        add = wanted - r->granted;
    }
    if (add > 0) {
        pn_link_flow(l, (int)add);
        r->granted += add;
    }
}

static void grant_initial(receiver_t *r, pn_link_t *l)
{
    uint64_t n = r->window < r->count ? r->window : r->count;
    pn_link_flow(l, (int)n);
    r->granted = n;
}

static void ensure_room(receiver_t *r, size_t need)
{
    if (need <= r->cap) {
        return;
    }
    size_t cap = r->cap ? r->cap : 65536;
    while (cap < need) {
        cap *= 2;
    }
    char *b = realloc(r->buf, cap);
    if (b == NULL) {
        fprintf(stderr, "%s: out of memory (%zu bytes)\n", prog, cap);
        exit(1);
    }
    r->buf = b;
    r->cap = cap;
}

/* An aborted delivery used up a credit without bringing a message: drop it
 * and let the credit it took be granted again. */
static void drop_aborted(receiver_t *r, pn_delivery_t *d)
{
    pn_link_t *l = pn_delivery_link(d);
    pn_delivery_settle(d);
    r->have = 0;
    if (r->granted > 0) {
        r->granted--;
    }
    top_up(r, l);
}

static void on_delivery(receiver_t *r, pn_delivery_t *d)
{
    pn_link_t *l = pn_delivery_link(d);
    if (!pn_link_is_receiver(l) || l != r->link || r->done) {
        return;
    }
    if (pn_delivery_aborted(d)) {
        drop_aborted(r, d);
        return;
    }
    if (!pn_delivery_readable(d)) {
        return;
    }
    size_t pending;
    while ((pending = pn_delivery_pending(d)) > 0) {
        ensure_room(r, r->have + pending);
        ssize_t n = pn_link_recv(l, r->buf + r->have, r->cap - r->have);
        if (n == PN_ABORTED) {
            drop_aborted(r, d);
            return;
        }
        if (n <= 0) {
            break;              /* 0: nothing more now; PN_EOS: complete */
        }
        r->have += (size_t)n;
    }
    if (pn_delivery_partial(d)) {
        return;                 /* more frames to come */
    }

    r->arrived++;
    if (r->release_every != 0 && r->arrived % r->release_every == 0
        && !pn_delivery_settled(d)) {
        r->have = 0;
        r->released++;
        pn_delivery_update(d, PN_RELEASED);
        pn_link_advance(l);
        pn_delivery_settle(d);
        top_up(r, l);
        return;
    }
    uint64_t now = hop_now_ns();
    uint64_t lat = 0;
    if (r->have >= 8) {
        uint64_t ts = hop_get_le64(r->buf + r->have - 8);
        if (ts > now) {
            r->bad_stamps++;
        } else {
            lat = now - ts;
        }
    } else {
        r->short_msgs++;
    }
    r->have = 0;
    if (r->received == 0) {
        r->first = now;
    }
    r->last = now;
    r->latency[r->received++] = lat;

    if (!pn_delivery_settled(d)) {
        pn_delivery_update(d, PN_ACCEPTED);
    }
    pn_link_advance(l);
    pn_delivery_settle(d);

    if (r->received == r->count) {
        r->done = true;
        close_connection(r);
    } else {
        top_up(r, l);
    }
}

static void handle(receiver_t *r, pn_event_t *e)
{
    switch (pn_event_type(e)) {
    case PN_LISTENER_OPEN:
        printf("listening\n");
        fflush(stdout);
        break;

    case PN_LISTENER_ACCEPT: {
        pn_listener_t *lst = pn_event_listener(e);
        if (r->conn != NULL) {
            break;              /* only one connection is taken */
        }
        r->conn = pn_connection();
        char container[64];
        snprintf(container, sizeof container, "hop-recv-%ld", (long)getpid());
        pn_connection_set_container(r->conn, container);
        pn_transport_t *t = hop_server_transport();
        if (r->max_frame != 0) {
            pn_transport_set_max_frame(t, r->max_frame);
        }
        pn_listener_accept2(lst, r->conn, t);
        pn_listener_close(lst);
        r->listener = NULL;
        break;
    }
    case PN_LISTENER_CLOSE: {
        pn_listener_t *lst = pn_event_listener(e);
        if (r->conn == NULL) {
            if (!hop_report_condition(prog, "listener", pn_listener_condition(lst))) {
                fprintf(stderr, "%s: listener closed\n", prog);
            }
            r->failed = true;
            r->finished = true;
        }
        r->listener = NULL;
        break;
    }
    case PN_CONNECTION_INIT:
        if (!r->listen) {
            pn_connection_t *c = pn_event_connection(e);
            pn_connection_open(c);
            pn_session_t *ssn = pn_session(c);
            pn_session_open(ssn);
            char name[64];
            snprintf(name, sizeof name, "hop-recv-%ld", (long)getpid());
            pn_link_t *l = pn_receiver(ssn, name);
            pn_terminus_set_address(pn_link_source(l), r->address);
            pn_terminus_set_address(pn_link_target(l), r->address);
            pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
            pn_link_open(l);
            r->link = l;
            grant_initial(r, l);
        }
        break;

    case PN_CONNECTION_REMOTE_OPEN: {
        pn_connection_t *c = pn_event_connection(e);
        hop_check_node(prog, c, r->node, r->node_seen, sizeof r->node_seen);
        if (pn_connection_state(c) & PN_LOCAL_UNINIT) {
            pn_connection_open(c);
        }
        break;
    }
    case PN_SESSION_REMOTE_OPEN: {
        pn_session_t *ssn = pn_event_session(e);
        if (pn_session_state(ssn) & PN_LOCAL_UNINIT) {
            pn_session_open(ssn);
        }
        break;
    }
    case PN_LINK_REMOTE_OPEN: {
        pn_link_t *l = pn_event_link(e);
        if (!(pn_link_state(l) & PN_LOCAL_UNINIT)) {
            break;              /* our own link, attached by the peer */
        }
        if (!pn_link_is_receiver(l) || r->link != NULL) {
            pn_condition_t *cond = pn_link_condition(l);
            pn_condition_set_name(cond, "amqp:not-allowed");
            pn_condition_set_description(cond, "hop-recv takes one incoming link");
            pn_link_open(l);
            pn_link_close(l);
            break;
        }
        pn_terminus_copy(pn_link_source(l), pn_link_remote_source(l));
        pn_terminus_copy(pn_link_target(l), pn_link_remote_target(l));
        pn_link_set_snd_settle_mode(l, pn_link_remote_snd_settle_mode(l));
        pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
        const char *a = pn_terminus_get_address(pn_link_remote_target(l));
        if (a == NULL || strcmp(a, r->address) != 0) {
            fprintf(stderr, "%s: note: the sender's link targets '%s', not '%s'\n",
                    prog, a ? a : "(none)", r->address);
        }
        pn_link_open(l);
        r->link = l;
        grant_initial(r, l);
        break;
    }
    case PN_DELIVERY:
        on_delivery(r, pn_event_delivery(e));
        break;

    case PN_CONNECTION_WAKE:
        if (r->giving_up) {
            close_connection(r);
        }
        break;

    case PN_PROACTOR_TIMEOUT:
        if (r->giving_up) {
            r->finished = true;         /* the grace period is over */
        } else if (r->idle_s > 0 && r->received > 0 && !r->done
                   && hop_now_ns() - r->last >= (uint64_t)(r->idle_s * 1e9)) {
            r->done = true;             /* the rest is not coming */
            close_connection(r);
        } else if (hop_now_ns() >= r->deadline) {
            if (r->done) {
                fprintf(stderr, "%s: warning: the peer did not close the connection\n", prog);
                r->finished = true;
            } else {
                fprintf(stderr, "%s: timed out after %.1f s: received %" PRIu64 " of %" PRIu64 "\n",
                        prog, r->timeout_s, r->received, r->count);
                r->failed = true;
                /* Close in the connection's own context, then give the peer
                 * a second to answer before leaving anyway. */
                r->giving_up = true;
                if (r->conn != NULL) {
                    pn_connection_wake(r->conn);
                    pn_proactor_set_timeout(r->proactor, 1000);
                } else {
                    r->finished = true;
                }
            }
        } else {
            uint64_t left = r->deadline - hop_now_ns();
            if (r->idle_s > 0 && left > (uint64_t)(r->idle_s * 1e9)) {
                left = (uint64_t)(r->idle_s * 1e9);
            }
            pn_proactor_set_timeout(r->proactor, (pn_millis_t)(left / 1000000u + 1));
        }
        break;

    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
        pn_link_t *l = pn_event_link(e);
        if (l == r->link && !r->done) {
            /* print the peer's reason even when it answers our own close */
            bool said = hop_report_condition(prog, "link closed by peer",
                                             pn_link_remote_condition(l));
            if (!said && !r->closing) {
                fprintf(stderr, "%s: link closed by peer after %" PRIu64 " messages\n",
                        prog, r->received);
            }
            if (!r->closing) {
                fail(r);
            }
        } else if (l != r->link && (pn_link_state(l) & PN_LOCAL_ACTIVE)) {
            pn_link_close(l);
        }
        break;
    }
    case PN_SESSION_REMOTE_CLOSE:
        if (!r->done) {
            /* print the peer's reason even when it answers our own close */
            bool said = hop_report_condition(prog, "session closed by peer",
                                             pn_session_remote_condition(pn_event_session(e)));
            if (!said && !r->closing) {
                fprintf(stderr, "%s: session closed by peer after %" PRIu64 " messages\n",
                        prog, r->received);
            }
            if (!r->closing) {
                fail(r);
            }
        }
        break;

    case PN_CONNECTION_REMOTE_CLOSE:
        r->remote_closed = true;
        if (!r->done) {
            /* print the peer's reason even when it answers our own close */
            bool said = hop_report_condition(prog, "connection closed by peer",
                                             pn_connection_remote_condition(pn_event_connection(e)));
            if (!said && !r->closing) {
                fprintf(stderr, "%s: connection closed by peer after %" PRIu64 " messages\n",
                        prog, r->received);
            }
            if (!r->closing) {
                r->failed = true;
            }
        }
        close_connection(r);
        break;

    case PN_TRANSPORT_CLOSED: {
        pn_condition_t *cond = pn_transport_condition(pn_event_transport(e));
        if (!r->done && !r->failed) {
            if (!hop_report_condition(prog, "connection failed", cond)) {
                fprintf(stderr, "%s: connection closed after %" PRIu64 " messages\n",
                        prog, r->received);
            }
            r->failed = true;
        }
        r->conn = NULL;
        r->link = NULL;
        if (r->listener != NULL) {
            pn_listener_close(r->listener);
        }
        r->finished = true;
        break;
    }
    case PN_PROACTOR_INACTIVE:
        r->finished = true;
        break;

    default:
        break;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted values, in microseconds. */
static double pct_us(const uint64_t *v, uint64_t n, double p)
{
    uint64_t rank = (uint64_t)(p * (double)n + 0.999999999);
    if (rank < 1) {
        rank = 1;
    }
    if (rank > n) {
        rank = n;
    }
    return (double)v[rank - 1] / 1000.0;
}

int main(int argc, char **argv)
{
    static receiver_t r;
    parse_args(&r, argc, argv);

    r.latency = malloc(r.count * sizeof *r.latency);
    if (r.latency == NULL) {
        fprintf(stderr, "%s: out of memory for %" PRIu64 " latencies\n", prog, r.count);
        return 1;
    }
    ensure_room(&r, 65536);

    hop_tune_malloc();
    r.proactor = pn_proactor();
    r.deadline = hop_now_ns() + (uint64_t)(r.timeout_s * 1e9);
    uint64_t ms = (uint64_t)(r.timeout_s * 1000.0) + 1;
    if (r.idle_s > 0 && r.idle_s < r.timeout_s) {
        ms = (uint64_t)(r.idle_s * 1000.0) + 1;   /* look for idleness every idle_s */
    }
    pn_proactor_set_timeout(r.proactor, (pn_millis_t)(ms > 0x7fffffffu ? 0x7fffffffu : ms));

    if (r.listen) {
        r.listener = pn_listener();
        pn_proactor_listen(r.proactor, r.listener, r.addr, 16);
    } else {
        r.conn = pn_connection();
        char container[64];
        snprintf(container, sizeof container, "hop-recv-%ld", (long)getpid());
        pn_connection_set_container(r.conn, container);
        pn_connection_set_hostname(r.conn, r.host);
        pn_transport_t *t = hop_client_transport(r.no_sasl, r.tls);
        if (r.max_frame != 0) {
            pn_transport_set_max_frame(t, r.max_frame);
        }
        pn_proactor_connect2(r.proactor, r.conn, t, r.addr);
    }

    while (!r.finished) {
        pn_event_batch_t *batch = pn_proactor_wait(r.proactor);
        pn_event_t *e;
        while ((e = pn_event_batch_next(batch)) != NULL) {
            handle(&r, e);
        }
        pn_proactor_done(r.proactor, batch);
    }

    int status = 0;
    if (r.failed || !r.done) {
        fprintf(stderr, "%s: failed: received %" PRIu64 " of %" PRIu64 "\n",
                prog, r.received, r.count);
        status = 1;
    } else {
        if (r.short_msgs != 0) {
            fprintf(stderr, "%s: warning: %" PRIu64 " messages shorter than 8 bytes\n",
                    prog, r.short_msgs);
        }
        if (r.bad_stamps != 0) {
            fprintf(stderr, "%s: warning: %" PRIu64 " messages did not end with a send"
                    " timestamp (latency counted as 0)\n", prog, r.bad_stamps);
        }
        uint64_t n = r.received;
        qsort(r.latency, n, sizeof *r.latency, cmp_u64);
        uint64_t dt = r.last > r.first ? r.last - r.first : 0;
        double secs = (double)dt / 1e9;
        double rate = secs > 0.0 ? (double)n / secs : 0.0;
        printf("{\"received\": %" PRIu64 ", \"released\": %" PRIu64
               ", \"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64
               ", \"seconds\": %.9f, \"rate\": %.1f, \"latency_us\": {\"p50\": %.3f"
               ", \"p90\": %.3f, \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f}"
               ", \"node\": \"%s\"}\n",
               n, r.released, r.first, r.last, secs, rate,
               pct_us(r.latency, n, 0.50), pct_us(r.latency, n, 0.90),
               pct_us(r.latency, n, 0.99), pct_us(r.latency, n, 0.999),
               (double)r.latency[n - 1] / 1000.0, r.node_seen);
        fflush(stdout);
    }
    if (r.listener != NULL) {
        pn_listener_close(r.listener);
    }
    pn_proactor_free(r.proactor);
    free(r.latency);
    free(r.buf);
    return status;
}
