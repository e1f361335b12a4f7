/*
 * hop-send: AMQP 1.0 load generator (sending side) for the Hop benchmarks.
 *
 *   hop-send URL ADDRESS [--count N] [--size S] [--presettled] [--rate R]
 *                        [--timeout SECS] [--no-sasl] [--node NAME]
 *                        [--start-at NS]
 *
 * Sends N messages whose body is one Data section of S bytes; the last 8
 * bytes of every message (the end of the body) carry the CLOCK_MONOTONIC
 * send time in nanoseconds, little-endian.  The message is encoded once and
 * only those 8 bytes are patched per message.  With --start-at, the link is
 * attached at once and the first message waits for that CLOCK_MONOTONIC
 * time, so that several senders placed one after another start together.
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

#include <proton/codec.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/terminus.h>

static const char *prog = "hop-send";

typedef struct {
    /* configuration */
    char addr[600];
    char host[512];
    const char *address;
    uint64_t count;
    uint64_t size;
    bool presettled;
    double rate;
    double timeout_s;
    bool no_sasl;
    const char *node;         /* --node: the router node to be served by */
    char node_seen[128];      /* the node that served it */
    uint64_t start_at;        /* --start-at: monotonic ns of the first send (0: at once) */
    bool tls;     /* amqps:// */

    /* proton */
    pn_proactor_t *proactor;
    pn_connection_t *conn;
    pn_link_t *link;

    /* the encoded message; the last 8 bytes are the timestamp */
    char *msg;
    size_t msg_len;

    /* progress */
    uint8_t *counted;         /* one bit per delivery tag: outcome counted */
    uint64_t sent;
    uint64_t settled;
    uint64_t accepted, released, rejected, modified, other;
    uint64_t t0, t1;          /* first send; last settlement (or send) */
    uint64_t deadline;        /* monotonic ns */
    uint64_t sched0;          /* rate mode: start of the send schedule */

    bool done;                /* all sent and (unsettled) all settled */
    bool closing;             /* we closed the connection */
    bool remote_closed;       /* the peer closed the connection */
    bool failed;
    bool giving_up;           /* timed out: closing, with a short grace period */
    bool finished;            /* leave the event loop */
} sender_t;

static void usage(void)
{
    fprintf(stderr,
            "usage: %s URL ADDRESS [--count N] [--size S] [--presettled] [--rate R]\n"
            "                [--timeout SECS] [--no-sasl]\n"
            "  URL        amqp://HOST:PORT or HOST:PORT\n"
            "  --count    messages to send (default 100000)\n"
            "  --size     body bytes, at least 8 (default 100)\n"
            "  --presettled  send pre-settled (default: unsettled, wait for outcomes)\n"
            "  --rate     messages per second, 0 = as fast as credit allows (default 0)\n"
            "  --timeout  give up after SECS seconds (default 60)\n"
            "  --no-sasl  skip the SASL layer (default: SASL ANONYMOUS)\n"
            "  --node     exit 3 unless the router's container id is NAME\n"
            "  --start-at send the first message at this CLOCK_MONOTONIC time (ns)\n",
            prog);
    exit(2);
}

static void parse_args(sender_t *s, int argc, char **argv)
{
    const char *positional[2];
    int npos = 0;
    s->count = 100000;
    s->size = 100;
    s->rate = 0.0;
    s->timeout_s = 60.0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage();
        } else if (strcmp(a, "--presettled") == 0) {
            s->presettled = true;
        } else if (strcmp(a, "--no-sasl") == 0) {
            s->no_sasl = true;
        } else if (hop_opt_value(prog, argc, argv, &i, "--node", &v)) {
            s->node = v;
        } else if (hop_opt_value(prog, argc, argv, &i, "--start-at", &v)) {
            s->start_at = hop_parse_u64(prog, "--start-at", v);
        } else if (hop_opt_value(prog, argc, argv, &i, "--count", &v)) {
            s->count = hop_parse_u64(prog, "--count", v);
        } else if (hop_opt_value(prog, argc, argv, &i, "--size", &v)) {
            s->size = hop_parse_u64(prog, "--size", v);
        } else if (hop_opt_value(prog, argc, argv, &i, "--rate", &v)) {
            s->rate = hop_parse_double(prog, "--rate", v);
        } else if (hop_opt_value(prog, argc, argv, &i, "--timeout", &v)) {
            s->timeout_s = hop_parse_double(prog, "--timeout", v);
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
    if (s->count == 0) {
        fprintf(stderr, "%s: --count must be at least 1\n", prog);
        exit(2);
    }
    if (s->size < 8) {
        fprintf(stderr, "%s: --size must be at least 8\n", prog);
        exit(2);
    }
    if (s->size > UINT32_MAX - 64) {
        fprintf(stderr, "%s: --size too large\n", prog);
        exit(2);
    }
    if (!hop_parse_url(prog, positional[0], s->addr, sizeof s->addr,
                       s->host, sizeof s->host, &s->tls)) {
        exit(2);
    }
    s->address = positional[1];
}

/* Encode the message once: a bare message whose body is one Data section
 * holding `size` bytes.  With nothing after the body, the last 8 bytes of
 * the encoding are the last 8 bytes of the body. */
static void encode_message(sender_t *s)
{
    char *payload = malloc(s->size);
    if (payload == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        exit(1);
    }
    for (uint64_t i = 0; i < s->size; i++) {
        payload[i] = (char)('a' + i % 26);
    }
    memset(payload + s->size - 8, 0, 8);

    pn_message_t *m = pn_message();
    pn_message_set_inferred(m, true);          /* binary body -> Data section */
    pn_data_t *body = pn_message_body(m);
    pn_data_put_binary(body, pn_bytes(s->size, payload));

    size_t cap = s->size + 64;
    s->msg = malloc(cap);
    if (s->msg == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        exit(1);
    }
    size_t len = cap;
    int err = pn_message_encode(m, s->msg, &len);
    if (err != 0) {
        fprintf(stderr, "%s: pn_message_encode failed: %d\n", prog, err);
        exit(1);
    }
    if (len < s->size || memcmp(s->msg + len - s->size, payload, s->size) != 0) {
        fprintf(stderr, "%s: encoded message does not end with the body\n", prog);
        exit(1);
    }
    s->msg_len = len;
    pn_message_free(m);
    free(payload);
}

static void close_connection(sender_t *s)
{
    if (s->closing || s->conn == NULL) {
        return;
    }
    s->closing = true;
    if (s->link != NULL) {
        pn_link_close(s->link);
        pn_session_close(pn_link_session(s->link));
    }
    pn_connection_close(s->conn);
}

static void fail(sender_t *s)
{
    s->failed = true;
    close_connection(s);
}

static void mark_done(sender_t *s, uint64_t t1)
{
    if (s->done) {
        return;
    }
    s->done = true;
    s->t1 = t1;
    close_connection(s);
}

static void send_available(sender_t *s)
{
    pn_link_t *link = s->link;
    if (link == NULL || s->closing || s->sent >= s->count) {
        return;
    }
    if (s->sent == 0 && s->start_at != 0 && hop_now_ns() < s->start_at) {
        return;                 /* the timer wakes the connection at start_at */
    }
    uint64_t limit = s->count;
    if (s->rate > 0.0) {
        if (s->sched0 == 0) {
            if (pn_link_credit(link) <= 0) {
                return;
            }
            s->sched0 = hop_now_ns();
        }
        double elapsed = (double)(hop_now_ns() - s->sched0);
        uint64_t due = 1 + (uint64_t)(elapsed * s->rate / 1e9);
        if (due < limit) {
            limit = due;
        }
    }
    char *stamp = s->msg + s->msg_len - 8;
    uint64_t ts = 0;
    while (s->sent < limit && pn_link_credit(link) > 0) {
        uint64_t tag = s->sent;
        pn_delivery_t *d = pn_delivery(link, pn_dtag((const char *)&tag, sizeof tag));
        ts = hop_now_ns();
        if (s->sent == 0) {
            s->t0 = ts;
        }
        hop_put_le64(stamp, ts);
        pn_link_send(link, s->msg, s->msg_len);
        pn_link_advance(link);
        if (s->presettled) {
            pn_delivery_settle(d);
        }
        s->sent++;
    }
    if (s->presettled && s->sent == s->count) {
        mark_done(s, ts);
    }
}

static void on_outcome(sender_t *s, pn_delivery_t *d)
{
    if (s->presettled) {
        return;
    }
    /* Two disposition frames for one delivery can land in one batch; the
     * second event must not count it again. */
    pn_delivery_tag_t tag = pn_delivery_tag(d);
    uint64_t seq;
    if (tag.size != sizeof seq) {
        return;
    }
    memcpy(&seq, tag.start, sizeof seq);
    if (seq >= s->count || (s->counted[seq >> 3] & (1u << (seq & 7))) != 0) {
        return;
    }
    uint64_t state = pn_delivery_remote_state(d);
    switch (state) {
    case PN_ACCEPTED: s->accepted++; break;
    case PN_RELEASED: s->released++; break;
    case PN_REJECTED: s->rejected++; break;
    case PN_MODIFIED: s->modified++; break;
    default:
        if (!pn_delivery_settled(d)) {
            return;             /* PN_RECEIVED or nothing yet: not an outcome */
        }
        s->other++;             /* settled by the peer without an outcome */
        break;
    }
    s->counted[seq >> 3] |= (uint8_t)(1u << (seq & 7));
    pn_delivery_settle(d);
    s->settled++;
    if (s->settled == s->count && s->sent == s->count) {
        mark_done(s, hop_now_ns());
    }
}

static void arm_timer(sender_t *s)
{
    uint64_t now = hop_now_ns();
    if (s->rate > 0.0 && !s->done && s->sent < s->count) {
        pn_proactor_set_timeout(s->proactor, 1);
        return;
    }
    if (s->sent == 0 && s->start_at > now) {
        pn_proactor_set_timeout(s->proactor, (pn_millis_t)((s->start_at - now) / 1000000u + 1));
        return;
    }
    uint64_t left = s->deadline > now ? s->deadline - now : 0;
    uint64_t ms = left / 1000000u + 1;
    if (ms > 0x7fffffffu) {
        ms = 0x7fffffffu;
    }
    pn_proactor_set_timeout(s->proactor, (pn_millis_t)ms);
}

static void handle(sender_t *s, pn_event_t *e)
{
    switch (pn_event_type(e)) {
    case PN_CONNECTION_REMOTE_OPEN:
        hop_check_node(prog, pn_event_connection(e), s->node, s->node_seen,
                       sizeof s->node_seen);
        break;

    case PN_CONNECTION_INIT: {
        pn_connection_t *c = pn_event_connection(e);
        pn_connection_open(c);
        pn_session_t *ssn = pn_session(c);
        pn_session_open(ssn);
        char name[64];
        snprintf(name, sizeof name, "hop-send-%ld", (long)getpid());
        pn_link_t *l = pn_sender(ssn, name);
        pn_terminus_set_address(pn_link_target(l), s->address);
        pn_link_set_snd_settle_mode(l, s->presettled ? PN_SND_SETTLED : PN_SND_UNSETTLED);
        pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
        pn_link_open(l);
        s->link = l;
        break;
    }
    case PN_LINK_FLOW:
        send_available(s);
        break;

    case PN_CONNECTION_WAKE:
        if (s->giving_up) {
            close_connection(s);
        } else {
            send_available(s);
        }
        break;

    case PN_DELIVERY:
        on_outcome(s, pn_event_delivery(e));
        break;

    case PN_PROACTOR_TIMEOUT: {
        uint64_t now = hop_now_ns();
        if (s->giving_up) {
            s->finished = true;         /* the grace period is over */
            break;
        }
        if (now >= s->deadline) {
            if (s->done) {
                fprintf(stderr, "%s: warning: the peer did not close the connection\n", prog);
                s->finished = true;
            } else {
                fprintf(stderr, "%s: timed out after %.1f s: sent %" PRIu64 ", settled %" PRIu64
                        " of %" PRIu64 "\n", prog, s->timeout_s, s->sent, s->settled, s->count);
                s->failed = true;
                /* Close in the connection's own context, then give the peer
                 * a second to answer before leaving anyway. */
                s->giving_up = true;
                if (s->conn != NULL) {
                    pn_connection_wake(s->conn);
                    pn_proactor_set_timeout(s->proactor, 1000);
                } else {
                    s->finished = true;
                }
            }
            break;
        }
        if (s->conn != NULL && s->sent < s->count
            && (s->rate > 0.0 || (s->sent == 0 && s->start_at != 0))) {
            pn_connection_wake(s->conn);
        }
        arm_timer(s);
        break;
    }
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
        pn_link_t *l = pn_event_link(e);
        if (!s->done) {
            /* print the peer's reason even when it answers our own close */
            bool said = hop_report_condition(prog, "link closed by peer",
                                             pn_link_remote_condition(l));
            if (!said && !s->closing) {
                fprintf(stderr, "%s: link closed by peer before the end\n", prog);
            }
            if (!s->closing) {
                fail(s);
            }
        }
        break;
    }
    case PN_SESSION_REMOTE_CLOSE:
        if (!s->done) {
            /* print the peer's reason even when it answers our own close */
            bool said = hop_report_condition(prog, "session closed by peer",
                                             pn_session_remote_condition(pn_event_session(e)));
            if (!said && !s->closing) {
                fprintf(stderr, "%s: session closed by peer before the end\n", prog);
            }
            if (!s->closing) {
                fail(s);
            }
        }
        break;

    case PN_CONNECTION_REMOTE_CLOSE:
        s->remote_closed = true;
        if (!s->done) {
            /* print the peer's reason even when it answers our own close */
            bool said = hop_report_condition(prog, "connection closed by peer",
                                             pn_connection_remote_condition(pn_event_connection(e)));
            if (!said && !s->closing) {
                fprintf(stderr, "%s: connection closed by peer before the end\n", prog);
            }
            if (!s->closing) {
                s->failed = true;
            }
        }
        close_connection(s);
        break;

    case PN_TRANSPORT_CLOSED: {
        pn_condition_t *cond = pn_transport_condition(pn_event_transport(e));
        if (!s->done && !s->failed) {
            if (!hop_report_condition(prog, "connection failed", cond)) {
                fprintf(stderr, "%s: connection closed before the end\n", prog);
            }
            s->failed = true;
        } else if (!s->remote_closed && pn_condition_is_set(cond)) {
            /* We finished but the peer did not close cleanly.  With
             * pre-settled messages that means we cannot be sure they were
             * all read. */
            hop_report_condition(prog, "connection ended without a close", cond);
            if (s->presettled) {
                s->failed = true;
            }
        }
        s->conn = NULL;
        s->link = NULL;
        s->finished = true;
        break;
    }
    case PN_PROACTOR_INACTIVE:
        s->finished = true;
        break;

    default:
        break;
    }
}

int main(int argc, char **argv)
{
    static sender_t s;
    parse_args(&s, argc, argv);
    encode_message(&s);
    s.counted = calloc(s.count / 8 + 1, 1);
    if (s.counted == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }

    hop_tune_malloc();
    s.proactor = pn_proactor();
    uint64_t begin = hop_now_ns();
    if (s.start_at > begin) {
        begin = s.start_at;
    }
    s.deadline = begin + (uint64_t)(s.timeout_s * 1e9);
    s.conn = pn_connection();
    char container[64];
    snprintf(container, sizeof container, "hop-send-%ld", (long)getpid());
    pn_connection_set_container(s.conn, container);
    pn_connection_set_hostname(s.conn, s.host);
    pn_proactor_connect2(s.proactor, s.conn, hop_client_transport(s.no_sasl, s.tls), s.addr);
    arm_timer(&s);

    while (!s.finished) {
        pn_event_batch_t *batch = pn_proactor_wait(s.proactor);
        pn_event_t *e;
        while ((e = pn_event_batch_next(batch)) != NULL) {
            handle(&s, e);
        }
        pn_proactor_done(s.proactor, batch);
    }

    int status = 0;
    if (s.failed || !s.done) {
        fprintf(stderr, "%s: failed: sent %" PRIu64 " of %" PRIu64 ", settled %" PRIu64
                " (accepted %" PRIu64 ", released %" PRIu64 ", rejected %" PRIu64
                ", modified %" PRIu64 ")\n", prog, s.sent, s.count, s.settled,
                s.accepted, s.released, s.rejected, s.modified);
        status = 1;
    } else {
        if (s.other != 0) {
            fprintf(stderr, "%s: warning: %" PRIu64 " deliveries settled without an outcome\n",
                    prog, s.other);
        }
        uint64_t dt = s.t1 > s.t0 ? s.t1 - s.t0 : 0;
        double secs = (double)dt / 1e9;
        double rate = secs > 0.0 ? (double)s.sent / secs : 0.0;
        printf("{\"sent\": %" PRIu64 ", \"accepted\": %" PRIu64 ", \"released\": %" PRIu64
               ", \"rejected\": %" PRIu64 ", \"modified\": %" PRIu64
               ", \"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64
               ", \"seconds\": %.9f, \"rate\": %.1f, \"node\": \"%s\"}\n",
               s.sent, s.accepted, s.released, s.rejected, s.modified,
               s.t0, s.t1, secs, rate, s.node_seen);
        fflush(stdout);
    }
    pn_proactor_free(s.proactor);
    free(s.msg);
    free(s.counted);
    return status;
}
