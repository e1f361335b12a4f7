/*
 * hop-churn: connection churn load generator for the Hop benchmarks.
 *
 *   hop-churn URL ADDRESS [--connections N] [--parallel K] [--timeout SECS]
 *                         [--no-sasl]
 *
 * Opens N client connections, K at a time: each one opens, attaches a
 * sending link to ADDRESS, sends one unsettled 100-byte message as soon as
 * it has credit, waits for the outcome, settles it and closes the
 * connection; when its transport has closed the next connection starts.
 * The time of each connection, from connecting to its outcome, is recorded.
 *
 * Prints one JSON line on stdout at the end ("rate" is connections per
 * second, from the first connect to the last close); exit 0 when every
 * message was accepted, 1 on a timeout, a failed connection or another
 * outcome (reason on stderr), 2 on bad usage.
 */
#include "common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/terminus.h>

static const char *prog = "hop-churn";

typedef struct {
    pn_connection_t *conn;   /* NULL: free */
    uint64_t index;          /* which connection of the N */
    uint64_t started_ns;
    bool sent;
    bool outcome;
} slot_t;

typedef struct {
    char addr[600];
    char host[512];
    const char *address;
    uint64_t connections;
    uint64_t parallel;
    double timeout_s;
    bool no_sasl;
    bool tls;

    pn_proactor_t *proactor;
    slot_t *slots;
    char msg[256];
    size_t msg_len;

    uint64_t started, closed, accepted, other, failed;
    uint64_t *latency_ns;     /* connect to outcome, per connection */
    uint64_t outcomes;
    uint64_t t0, t1;
    uint64_t deadline;
    bool finished;
    bool timed_out;
} churn_t;

static void usage(void)
{
    fprintf(stderr,
            "usage: %s URL ADDRESS [--connections N] [--parallel K] [--timeout SECS]\n"
            "                 [--no-sasl]\n"
            "  URL            amqp://HOST:PORT, amqps://HOST:PORT or HOST:PORT\n"
            "  --connections  connections to make, one message each (default 10000)\n"
            "  --parallel     connections open at once (default 8)\n"
            "  --timeout      give up after SECS seconds (default 120)\n"
            "  --no-sasl      skip the SASL layer (default: SASL ANONYMOUS)\n",
            prog);
    exit(2);
}

static void parse_args(churn_t *c, int argc, char **argv)
{
    const char *positional[2];
    int npos = 0;
    c->connections = 10000;
    c->parallel = 8;
    c->timeout_s = 120.0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage();
        } else if (strcmp(a, "--no-sasl") == 0) {
            c->no_sasl = true;
        } else if (hop_opt_value(prog, argc, argv, &i, "--connections", &v)) {
            c->connections = hop_parse_u64(prog, "--connections", v);
        } else if (hop_opt_value(prog, argc, argv, &i, "--parallel", &v)) {
            c->parallel = hop_parse_u64(prog, "--parallel", v);
        } else if (hop_opt_value(prog, argc, argv, &i, "--timeout", &v)) {
            c->timeout_s = hop_parse_double(prog, "--timeout", v);
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
    if (c->connections == 0 || c->parallel == 0 || c->parallel > 10000) {
        fprintf(stderr, "%s: --connections must be at least 1, --parallel 1 to 10000\n",
                prog);
        exit(2);
    }
    if (!hop_parse_url(prog, positional[0], c->addr, sizeof c->addr,
                       c->host, sizeof c->host, &c->tls)) {
        exit(2);
    }
    c->address = positional[1];
}

static void encode_message(churn_t *c)
{
    char payload[100];
    memset(payload, 'c', sizeof payload);
    pn_message_t *m = pn_message();
    pn_message_set_inferred(m, true);
    pn_data_put_binary(pn_message_body(m), pn_bytes(sizeof payload, payload));
    size_t len = sizeof c->msg;
    if (pn_message_encode(m, c->msg, &len) != 0) {
        fprintf(stderr, "%s: pn_message_encode failed\n", prog);
        exit(1);
    }
    c->msg_len = len;
    pn_message_free(m);
}

static slot_t *slot_of(churn_t *c, pn_connection_t *conn)
{
    for (uint64_t i = 0; i < c->parallel; i++) {
        if (c->slots[i].conn == conn) {
            return &c->slots[i];
        }
    }
    return NULL;
}

static void start_one(churn_t *c, slot_t *slot)
{
    pn_connection_t *conn = pn_connection();
    char container[64];
    snprintf(container, sizeof container, "hop-churn-%ld-%" PRIu64, (long)getpid(),
             c->started);
    pn_connection_set_container(conn, container);
    pn_connection_set_hostname(conn, c->host);
    slot->conn = conn;
    slot->index = c->started;
    slot->started_ns = hop_now_ns();
    slot->sent = false;
    slot->outcome = false;
    if (c->started == 0) {
        c->t0 = slot->started_ns;
    }
    c->started++;
    pn_proactor_connect2(c->proactor, conn, hop_client_transport(c->no_sasl, c->tls), c->addr);
}

static void send_one(churn_t *c, slot_t *slot, pn_link_t *link)
{
    if (slot->sent || pn_link_credit(link) <= 0) {
        return;
    }
    uint64_t tag = slot->index;
    pn_delivery(link, pn_dtag((const char *)&tag, sizeof tag));
    pn_link_send(link, c->msg, c->msg_len);
    pn_link_advance(link);
    slot->sent = true;
}

static void on_outcome(churn_t *c, slot_t *slot, pn_delivery_t *d)
{
    uint64_t state = pn_delivery_remote_state(d);
    if (slot->outcome || (state == 0 && !pn_delivery_settled(d))) {
        return;
    }
    slot->outcome = true;
    if (state == PN_ACCEPTED) {
        c->accepted++;
    } else {
        c->other++;
    }
    c->latency_ns[c->outcomes++] = hop_now_ns() - slot->started_ns;
    pn_delivery_settle(d);
    pn_connection_close(slot->conn);
}

static void handle(churn_t *c, pn_event_t *e)
{
    pn_connection_t *conn = pn_event_connection(e);
    slot_t *slot = conn != NULL ? slot_of(c, conn) : NULL;
    switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT: {
        pn_connection_open(conn);
        pn_session_t *ssn = pn_session(conn);
        pn_session_open(ssn);
        pn_link_t *l = pn_sender(ssn, "hop-churn");
        pn_terminus_set_address(pn_link_target(l), c->address);
        pn_link_set_snd_settle_mode(l, PN_SND_UNSETTLED);
        pn_link_open(l);
        break;
    }
    case PN_LINK_FLOW:
        if (slot != NULL) {
            send_one(c, slot, pn_event_link(e));
        }
        break;
    case PN_DELIVERY:
        if (slot != NULL) {
            on_outcome(c, slot, pn_event_delivery(e));
        }
        break;
    case PN_CONNECTION_REMOTE_CLOSE:
        if (slot != NULL && !slot->outcome) {
            hop_report_condition(prog, "connection closed by peer",
                                 pn_connection_remote_condition(conn));
        }
        pn_connection_close(conn);
        break;
    case PN_TRANSPORT_CLOSED:
        if (slot != NULL) {
            if (!slot->outcome) {
                if (!hop_report_condition(prog, "connection failed",
                                          pn_transport_condition(pn_event_transport(e)))) {
                    fprintf(stderr, "%s: connection closed before its outcome\n", prog);
                }
                c->failed++;
            }
            slot->conn = NULL;
            c->closed++;
            c->t1 = hop_now_ns();
            if (c->started < c->connections && !c->timed_out) {
                start_one(c, slot);
            } else if (c->closed == c->started) {
                c->finished = true;
            }
        }
        break;
    case PN_PROACTOR_TIMEOUT:
        fprintf(stderr, "%s: timed out after %.1f s: %" PRIu64 " of %" PRIu64
                " connections closed\n", prog, c->timeout_s, c->closed, c->connections);
        c->timed_out = true;
        c->finished = true;
        break;
    default:
        break;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_us(const uint64_t *v, uint64_t n, double p)
{
    if (n == 0) {
        return 0.0;
    }
    uint64_t rank = (uint64_t)(p * (double)n + 0.999999999);
    rank = rank < 1 ? 1 : (rank > n ? n : rank);
    return (double)v[rank - 1] / 1000.0;
}

int main(int argc, char **argv)
{
    static churn_t c;
    parse_args(&c, argc, argv);
    encode_message(&c);
    c.slots = calloc(c.parallel, sizeof *c.slots);
    c.latency_ns = calloc(c.connections, sizeof *c.latency_ns);
    if (c.slots == NULL || c.latency_ns == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    c.proactor = pn_proactor();
    pn_proactor_set_timeout(c.proactor, (pn_millis_t)(c.timeout_s * 1000.0));
    for (uint64_t i = 0; i < c.parallel && c.started < c.connections; i++) {
        start_one(&c, &c.slots[i]);
    }
    while (!c.finished) {
        pn_event_batch_t *batch = pn_proactor_wait(c.proactor);
        pn_event_t *e;
        while ((e = pn_event_batch_next(batch)) != NULL) {
            handle(&c, e);
        }
        pn_proactor_done(c.proactor, batch);
    }
    int status = 0;
    if (c.timed_out || c.failed || c.other || c.accepted != c.connections) {
        fprintf(stderr, "%s: failed: %" PRIu64 " of %" PRIu64 " accepted, %" PRIu64
                " other outcomes, %" PRIu64 " connections failed\n", prog, c.accepted,
                c.connections, c.other, c.failed);
        status = 1;
    } else {
        qsort(c.latency_ns, c.outcomes, sizeof *c.latency_ns, cmp_u64);
        double secs = (double)(c.t1 - c.t0) / 1e9;
        printf("{\"connections\": %" PRIu64 ", \"accepted\": %" PRIu64
               ", \"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64
               ", \"seconds\": %.9f, \"rate\": %.1f, \"latency_us\": {\"p50\": %.3f"
               ", \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f}}\n",
               c.connections, c.accepted, c.t0, c.t1, secs,
               secs > 0.0 ? (double)c.connections / secs : 0.0,
               pct_us(c.latency_ns, c.outcomes, 0.50), pct_us(c.latency_ns, c.outcomes, 0.99),
               pct_us(c.latency_ns, c.outcomes, 0.999),
               pct_us(c.latency_ns, c.outcomes, 1.0));
        fflush(stdout);
    }
    pn_proactor_free(c.proactor);
    free(c.slots);
    free(c.latency_ns);
    return status;
}
