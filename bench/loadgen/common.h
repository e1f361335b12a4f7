/*
 * Shared helpers for the Hop benchmark load generators (hop-send, hop-recv).
 *
 * Both programs are single-threaded clients of one pn_proactor.
 */
#ifndef HOP_LOADGEN_COMMON_H
#define HOP_LOADGEN_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/transport.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t hop_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void hop_put_le64(char *p, uint64_t v)
{
    unsigned char *u = (unsigned char *)p;
    for (int i = 0; i < 8; i++) {
        u[i] = (unsigned char)(v >> (8 * i));
    }
}

static inline uint64_t hop_get_le64(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | u[i];
    }
    return v;
}

/* Split "amqp://HOST:PORT[/...]" or "HOST:PORT" (IPv6 as "[addr]:port")
 * into a proactor address "HOST:PORT" (written to addr) and the host name
 * alone (written to host).  Returns false and prints to stderr if the URL
 * cannot be understood. */
bool hop_parse_url(const char *prog, const char *url,
                   char *addr, size_t addr_size,
                   char *host, size_t host_size, bool *tls);

/* Parse an unsigned integer / a non-negative number, exiting with status 2
 * and a message on stderr when the text is not one. */
uint64_t hop_parse_u64(const char *prog, const char *opt, const char *text);
double hop_parse_double(const char *prog, const char *opt, const char *text);

/* Option matching for "--name VALUE" and "--name=VALUE".  When argv[*i]
 * is the option, stores its value, advances *i past what it used and
 * returns true. */
bool hop_opt_value(const char *prog, int argc, char **argv, int *i,
                   const char *name, const char **value);

/* A client transport (SASL ANONYMOUS unless no_sasl) or a server
 * transport (accepts SASL ANONYMOUS or a bare AMQP header). */
pn_transport_t *hop_client_transport(bool no_sasl, bool tls);

/* The router's container id (its node, with hopd --workers) is copied to
 * `seen` (the summary's "node"); with --node NAME it must be NAME, or the
 * program says where the connection landed and exits 3, so that the caller
 * can try again (the benchmark's placement of clients). */
void hop_check_node(const char *prog, pn_connection_t *c, const char *node,
                    char *seen, size_t size);
pn_transport_t *hop_server_transport(void);

/* Keep large buffers (proton's frame and delivery buffers for big messages)
 * on the heap instead of mmap/munmap-ing them over and over. */
void hop_tune_malloc(void);

/* Print "PROG: WHAT: name: description" on stderr when cond is set;
 * returns whether it was. */
bool hop_report_condition(const char *prog, const char *what,
                          pn_condition_t *cond);

#endif
