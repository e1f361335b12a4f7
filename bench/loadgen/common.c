#include "common.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <proton/proactor.h>
#include <proton/sasl.h>
#include <proton/ssl.h>

bool hop_parse_url(const char *prog, const char *url,
                   char *addr, size_t addr_size,
                   char *host, size_t host_size, bool *tls)
{
    const char *p = url;
    *tls = false;
    if (strncmp(p, "amqp://", 7) == 0) {
        p += 7;
    } else if (strncmp(p, "amqps://", 8) == 0) {
        p += 8;
        *tls = true;
    } else if (strstr(p, "://") != NULL) {
        fprintf(stderr, "%s: unsupported URL scheme in '%s' (use amqp[s]://HOST:PORT)\n",
                prog, url);
        return false;
    }
    /* Drop user info and any path. */
    const char *at = strchr(p, '@');
    if (at != NULL) {
        p = at + 1;
    }
    size_t n = strcspn(p, "/");
    char hostport[512];
    if (n == 0 || n >= sizeof hostport) {
        fprintf(stderr, "%s: bad URL '%s'\n", prog, url);
        return false;
    }
    memcpy(hostport, p, n);
    hostport[n] = '\0';

    char *h = hostport;
    char *port = NULL;
    if (h[0] == '[') {                       /* [v6addr]:port */
        char *close = strchr(h, ']');
        if (close == NULL) {
            fprintf(stderr, "%s: bad URL '%s'\n", prog, url);
            return false;
        }
        *close = '\0';
        h++;
        if (close[1] == ':') {
            port = close + 2;
        }
    } else {
        char *colon = strrchr(h, ':');
        if (colon != NULL) {
            *colon = '\0';
            port = colon + 1;
        }
    }
    if (port == NULL || *port == '\0') {
        port = *tls ? "5671" : "5672";
    }
    if (*h == '\0') {
        h = "127.0.0.1";
    }
    if (strlen(h) + 1 > host_size) {
        fprintf(stderr, "%s: host name too long in '%s'\n", prog, url);
        return false;
    }
    strcpy(host, h);
    int r = pn_proactor_addr(addr, addr_size, h, port);
    if (r < 0 || (size_t)r >= addr_size) {
        fprintf(stderr, "%s: address too long in '%s'\n", prog, url);
        return false;
    }
    return true;
}

uint64_t hop_parse_u64(const char *prog, const char *opt, const char *text)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
        fprintf(stderr, "%s: %s wants a non-negative integer, not '%s'\n", prog, opt, text);
        exit(2);
    }
    return (uint64_t)v;
}

double hop_parse_double(const char *prog, const char *opt, const char *text)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(v >= 0.0)) {
        fprintf(stderr, "%s: %s wants a non-negative number, not '%s'\n", prog, opt, text);
        exit(2);
    }
    return v;
}

bool hop_opt_value(const char *prog, int argc, char **argv, int *i,
                   const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0) {
        return false;
    }
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return true;
    }
    if (arg[n] != '\0') {
        return false;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", prog, name);
        exit(2);
    }
    *i += 1;
    *value = argv[*i];
    return true;
}

pn_transport_t *hop_client_transport(bool no_sasl, bool tls)
{
    pn_transport_t *t = pn_transport();
    if (!no_sasl) {
        pn_sasl_t *sasl = pn_sasl(t);
        pn_sasl_allowed_mechs(sasl, "ANONYMOUS");
    }
    if (tls) {
        /* Encryption cost only: the benchmark does not check the certificate. */
        static pn_ssl_domain_t *domain = NULL;
        if (domain == NULL) {
            domain = pn_ssl_domain(PN_SSL_MODE_CLIENT);
            pn_ssl_domain_set_peer_authentication(domain, PN_SSL_ANONYMOUS_PEER, NULL);
        }
        pn_ssl_init(pn_ssl(t), domain, NULL);
    }
    return t;
}

pn_transport_t *hop_server_transport(void)
{
    pn_transport_t *t = pn_transport();
    pn_transport_set_server(t);
    pn_transport_require_auth(t, false);
    pn_sasl_t *sasl = pn_sasl(t);
    pn_sasl_allowed_mechs(sasl, "ANONYMOUS");
    return t;
}

bool hop_report_condition(const char *prog, const char *what,
                          pn_condition_t *cond)
{
    if (cond == NULL || !pn_condition_is_set(cond)) {
        return false;
    }
    const char *name = pn_condition_get_name(cond);
    const char *desc = pn_condition_get_description(cond);
    fprintf(stderr, "%s: %s: %s: %s\n", prog, what,
            name ? name : "(no name)", desc ? desc : "(no description)");
    return true;
}

void hop_tune_malloc(void)
{
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
}

void hop_check_node(const char *prog, pn_connection_t *c, const char *node,
                    char *seen, size_t size)
{
    const char *landed = pn_connection_remote_container(c);
    snprintf(seen, size, "%s", landed ? landed : "");
    for (char *p = seen; *p; p++) {
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) {
            *p = '_';  /* printed in JSON as it is */
        }
    }
    if (node != NULL && (landed == NULL || strcmp(landed, node) != 0)) {
        fprintf(stderr, "%s: connected to node %s, not %s\n", prog,
                landed ? landed : "(none)", node);
        exit(3);
    }
}
