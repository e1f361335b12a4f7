/* Hop's per-message proton calls, several in one call from Python.
 *
 * Each call from Python into proton costs more than proton's own work for
 * it: converting the arguments and releasing and taking back the
 * interpreter lock (docs/performance.md#the-accelerator).  The functions
 * here make the calls of one step of the per-message path at once: finding
 * the next event worth Python's attention (and what it will ask about it),
 * reading a complete message off its link, putting a copy on a link.
 *
 * They call proton through the function pointers of python-qpid-proton's
 * own module (given to hop_accel_init at import), so the router and this
 * code use one copy of proton and nothing here links against it.  The
 * signatures below are those of proton 0.40, which pyproject pins.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    size_t size;
    const char *start;
} hop_bytes_t; /* pn_bytes_t, pn_delivery_tag_t */

static void *(*collector_peek)(void *);
static bool (*collector_pop)(void *);
static int (*event_type)(void *);
static void *(*event_delivery)(void *);
static void *(*event_link)(void *);
static void *(*delivery_link)(void *);
static size_t (*delivery_pending)(void *);
static bool (*delivery_partial)(void *);
static bool (*delivery_settled)(void *);
static bool (*delivery_aborted)(void *);
static uint64_t (*delivery_remote_state)(void *);
static ssize_t (*link_recv)(void *, char *, size_t);
static bool (*link_advance)(void *);
static void *(*delivery_new)(void *, hop_bytes_t);
static ssize_t (*link_send)(void *, const char *, size_t);
static void (*delivery_update)(void *, uint64_t);
static void (*delivery_settle)(void *);
static hop_bytes_t (*delivery_tag)(void *);

static int t_delivery, t_transport, t_link_flow;
static uint64_t t_skipped; /* bit t: events of type t are consumed unseen */

#define HOP_ACCEL_FUNCTIONS 18

int hop_accel_init(void **f, int n, int delivery, int transport, int link_flow,
                   uint64_t skipped)
{
    if (n != HOP_ACCEL_FUNCTIONS)
        return -1;
    for (int i = 0; i < n; i++)
        if (!f[i])
            return -1;
    collector_peek = (void *(*)(void *))f[0];
    collector_pop = (bool (*)(void *))f[1];
    event_type = (int (*)(void *))f[2];
    event_delivery = (void *(*)(void *))f[3];
    event_link = (void *(*)(void *))f[4];
    delivery_link = (void *(*)(void *))f[5];
    delivery_pending = (size_t (*)(void *))f[6];
    delivery_partial = (bool (*)(void *))f[7];
    delivery_settled = (bool (*)(void *))f[8];
    delivery_aborted = (bool (*)(void *))f[9];
    delivery_remote_state = (uint64_t (*)(void *))f[10];
    link_recv = (ssize_t (*)(void *, char *, size_t))f[11];
    link_advance = (bool (*)(void *))f[12];
    delivery_new = (void *(*)(void *, hop_bytes_t))f[13];
    link_send = (ssize_t (*)(void *, const char *, size_t))f[14];
    delivery_update = (void (*)(void *, uint64_t))f[15];
    delivery_settle = (void (*)(void *))f[16];
    delivery_tag = (hop_bytes_t (*)(void *))f[17];
    t_delivery = delivery;
    t_transport = transport;
    t_link_flow = link_flow;
    t_skipped = skipped;
    return 0;
}

int hop_next_event(void *collector, int pop, void **ptrs, int64_t *ints)
{
    if (pop)
        collector_pop(collector);
    for (;;) {
        void *e = collector_peek(collector);
        if (!e)
            return 0;
        int t = event_type(e);
        if (t == t_transport || (t >= 0 && t < 64 && (t_skipped >> t) & 1)) {
            collector_pop(collector);
            continue;
        }
        ptrs[0] = e;
        if (t == t_delivery) {
            void *d = event_delivery(e);
            ptrs[1] = d;
            ptrs[2] = delivery_link(d);
            ints[0] = (int64_t)delivery_pending(d);
            int64_t flags = delivery_partial(d) ? 1 : 0;
            if (delivery_settled(d)) {
                flags |= 2;
                if (delivery_aborted(d))
                    flags |= 4;
            }
            uint64_t state = delivery_remote_state(d);
            if (state)
                flags |= 8;
            ints[1] = flags;
            ints[2] = (int64_t)state;
        } else if (t == t_link_flow) {
            ptrs[2] = event_link(e);
        }
        return t;
    }
}

ssize_t hop_recv_whole(void *link, char *buffer, size_t n)
{
    ssize_t got = link_recv(link, buffer, n);
    link_advance(link);
    return got;
}

void *hop_send_copy(void *link, uint64_t tag, const char *data, size_t n)
{
    hop_bytes_t t = {sizeof tag, (const char *)&tag};
    void *od = delivery_new(link, t); /* proton copies the tag */
    link_send(link, data, n);
    link_advance(link);
    return od;
}

void hop_update_settle(void *d, uint64_t state)
{
    delivery_update(d, state);
    delivery_settle(d);
}

void *hop_relay_whole(void *d, void *link, void *partner, char *buffer, size_t n,
                      size_t max_tag)
{
    hop_bytes_t tag = delivery_tag(d);
    if (tag.size > max_tag)
        return NULL;
    void *od = delivery_new(partner, tag); /* proton copies the tag */
    ssize_t got = link_recv(link, buffer, n);
    if (got > 0)
        link_send(partner, buffer, (size_t)got);
    link_advance(link);
    link_advance(partner);
    return od;
}

void hop_pass_outcome(void *d, void *od, uint64_t state)
{
    delivery_update(d, state);
    delivery_settle(d);
    delivery_settle(od);
}
