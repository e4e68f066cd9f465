// SPDX-License-Identifier: GPL-2.0
/* vmmtui trace: the calls that share memory between processes, seen in the kernel.
 *
 * sys_enter/sys_exit (tp_btf: arguments read straight from the BTF-typed pt_regs; raw_tp, with
 * probe reads, where the kernel refuses tp_btf) catch sendmsg/recvmsg (+mmsg) carrying
 * SCM_RIGHTS, pidfd_open, pidfd_getfd, close, close_range, dup*, fcntl(F_DUPFD*) and memfd_create
 * of the traced processes; sched_process_fork/exec/exit follow the process tree (children of a
 * traced process are traced from their first instruction). Every fd that travels is named by its
 * struct file pointer, read from the fd table of the sender and of the receiver (the same pointer
 * on both sides is the same open file), and its socket by its struct sock and its peer's: a
 * message is queued on the sending socket's peer, so userspace matches a receive to its send
 * exactly, on the socket pair that carried it. The records' layout is trace.h.
 *
 * Cost: every syscall of the machine passes sys_enter and sys_exit, so both end at once for the
 * calls not traced (the syscall number, then one bit of the tgid bitmap: an array lookup the
 * verifier inlines, no helper call). sys_enter decides what a close or dup is worth (the file
 * its fd names must be watched) and stashes that in the task's storage; sys_exit finds it, or
 * ends. A traced call writes one record of its own kind, reserved and submitted in place in its
 * CPU's ring buffer; a message is read at exit (the saved user registers still hold the
 * arguments), its control buffer only when there is one, a cmsg's header and its first 16 fds in
 * one read. Under tp_btf the kernel's structures are read by plain loads the verifier guards
 * (bpf_rdonly_cast), not a probe-read helper call per field; the per-fd work is global functions,
 * verified once.
 *
 * A message with more fds than one record holds (16) is followed by continuation records (up to
 * SCM_RIGHTS' 253); what could not be read is counted in the head record, never cut silently.
 * kfree_skb reports the SCM_RIGHTS fds of a Unix socket's message freed unreceived (the socket
 * holding it released or collected): the kernel's own statement that they were never received;
 * skb_copy_datagram_iovec, a message's fds a read() without room for them made the kernel close.
 * Two uprobe programs, attached by userspace to each CUDA driver function with the function's
 * index as the BPF cookie, record the driver calls with their CUresult. What does not fit in its
 * CPU's ring buffer is counted per CPU with the time of its first and last drop, never dropped
 * silently.
 * Rebuild with scripts/build-bpf.sh (the shipped trace.bpf.o must match this source). */
#include "kernel.h"
#include "trace.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

/* a kernel pointer held as a number, typed again for the verifier (tp_btf): fields are then read
 * by plain loads it guards (a fault reads 0), not a probe-read helper call each; the kfunc
 * compiles to a register move */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
#define CAST(p, T) ((struct T *)bpf_rdonly_cast((void *)(__u64)(p), bpf_core_type_id_kernel(struct T)))

/* keeps the record structs of trace.h in the object's BTF (nothing calls it; libbpf loads only the
 * functions programs call): tests/trace/test_record_layout.py reads them from there */
__attribute__((used)) static int record_layouts(struct rec *a, struct rec_named *b,
						struct rec_msg *c, struct rec_fds *d,
						struct rec_cuda *e)
{
	return 0;
}

__attribute__((used)) static int more_record_layouts(struct rec_refusal *a)
{
	return 0;
}

#define MAXCHUNKS 16 /* records per message: 16 x 16 >= 253 */
#define SCM_MAX_FD 253
#define MAXMSGS 8
#define MAXCMSGS 4
#define MAXCPUS 1024
#define PID_WORDS (4194304 / 64) /* PID_MAX_LIMIT bits */

/* x86_64 syscall numbers */
#define NR_read 0
#define NR_close 3
#define NR_readv 19
#define NR_recvfrom 45
#define NR_dup 32
#define NR_dup2 33
#define NR_sendmsg 46
#define NR_recvmsg 47
#define NR_fcntl 72
#define NR_dup3 292
#define NR_recvmmsg 299
#define NR_sendmmsg 307
#define NR_memfd_create 319
#define NR_pidfd_open 434
#define NR_close_range 436
#define NR_pidfd_getfd 438
#define F_DUPFD 0
#define F_DUPFD_CLOEXEC 1030
#define SOL_SOCKET 1
#define SCM_RIGHTS 1
#define AF_UNIX 1

struct config {
	__u32 everything; /* trace every process (--all) */
	__u32 self;       /* the tracer's own tgid: never traced */
};

/* drops of one CPU: userspace writes `seen` (mmap) after it reported up to `count`; the first
 * drop after that starts a new window */
struct drops {
	__u64 count;
	__u64 seen;
	__u64 first;
	__u64 last;
	__u64 unread; /* bytes not yet read in the ring at the last drop: a full ring, or not */
};

struct cuda_args {
	__u64 arg[6];
	__u64 t0;
	__u64 file; /* the struct file of an imported fd, read at entry */
	__u8 ipc[64];
};

struct cuda_key {
	__u32 tid;
	__u32 func;
};

/* one ring buffer per CPU, made by userspace after load (sized from --ring-mb) and put here: a
 * record's reservation takes its own CPU's ring lock, never contends with another CPU's; a
 * record its own ring refuses goes to the next CPU's (see reserve) */
struct ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 12);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MAXCPUS); /* the possible CPUs, set by userspace */
	__type(key, __u32);
	__array(values, struct ring);
} rings SEC(".maps");

/* one bit per tgid: word tgid / 64, bit tgid % 64 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PID_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} traced SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

/* the open files worth following (memfds, fds that travelled or were taken, CUDA exports, and
 * their dups): only their close/dup is recorded, not the hundreds a program start makes */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u8);
} watched SEC(".maps");

/* what sys_enter decided a call is worth, for its sys_exit: the syscall, its arguments, and for a
 * close or dup the watched file its fd names. In the task's own storage (tp_btf), else in a hash
 * by thread id; nr 0 (read) is never stashed, so 0 means "nothing to do at exit" */
struct pending {
	__u64 nr;
	__u64 a0;
	__u64 file;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pending);
} pending_task SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pending);
} pending_tid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cuda_key);
	__type(value, struct cuda_args);
} cuda_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAXCPUS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct drops);
} lost SEC(".maps");

/* --all: calls counted per process and kind in the kernel (no record needed for a count) */
struct count_key {
	__u32 tgid;
	__u32 kind;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct count_key);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline bool is_traced(__u32 tgid)
{
	__u32 w = tgid >> 6, zero = 0;
	__u64 *bits = bpf_map_lookup_elem(&traced, &w);
	if (bits && (*bits >> (tgid & 63)) & 1)
		return true;
	struct config *c = bpf_map_lookup_elem(&config, &zero);
	return c && c->everything && c->self != tgid;
}

static __always_inline void set_traced(__u32 tgid, bool on)
{
	__u32 w = tgid >> 6;
	__u64 *bits = bpf_map_lookup_elem(&traced, &w);
	if (!bits)
		return;
	if (on)
		__sync_fetch_and_or(bits, 1ULL << (tgid & 63));
	else
		__sync_fetch_and_and(bits, ~(1ULL << (tgid & 63)));
}

static __always_inline void count(__u32 tgid, __u32 kind)
{
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&config, &zero);
	if (!c || !c->everything)
		return;
	struct count_key k = {.tgid = tgid, .kind = kind};
	__u64 *n = bpf_map_lookup_elem(&counts, &k);
	if (n) {
		*n += 1;
		return;
	}
	__u64 one = 1;
	bpf_map_update_elem(&counts, &k, &one, BPF_NOEXIST);
}

static __always_inline void watch_file(__u64 f)
{
	__u8 one = 1;
	if (f && !bpf_map_lookup_elem(&watched, &f))
		bpf_map_update_elem(&watched, &f, &one, BPF_ANY);
}

static __always_inline bool is_watched(__u64 f)
{
	return f && bpf_map_lookup_elem(&watched, &f) != 0;
}

#define BPF_RB_NO_WAKEUP 1
#define BPF_RB_FORCE_WAKEUP 2
#define BPF_RB_AVAIL_DATA 0

static __always_inline void dropped(__u32 cpu, void *ring)
{
	struct drops *d = bpf_map_lookup_elem(&lost, &cpu);
	if (!d)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (d->count == d->seen)
		d->first = now;
	d->last = now;
	d->unread = ring ? bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) : 0;
	__sync_fetch_and_add(&d->count, 1);
}

/* a record of `size` bytes in this CPU's ring buffer, its head filled (NULL, counted, when
 * full). The program stays on its CPU from here to the submit (migration is disabled while a
 * BPF program runs), so a message's records follow each other in one ring. */
static __always_inline void *reserve(__u64 size, __u32 type, __u64 pid_tgid)
{
	__u32 cpu = bpf_get_smp_processor_id() & (MAXCPUS - 1);
	void *ring = bpf_map_lookup_elem(&rings, &cpu);
	struct rec *r = ring ? bpf_ringbuf_reserve(ring, size, 0) : 0;
	if (!r) {
		/* a reservation can fail with its ring nearly empty (seen on CPU 0 of a 2-CPU VM,
		 * about once in 250,000 records, at once, and again when tried again at once): the
		 * next CPU's ring (the first after the last), its lock another, takes the record */
		__u32 next = cpu + 1 < MAXCPUS ? cpu + 1 : 0;
		void *other = bpf_map_lookup_elem(&rings, &next);
		if (!other) {
			next = 0;
			other = bpf_map_lookup_elem(&rings, &next);
		}
		if (other && other != ring)
			r = bpf_ringbuf_reserve(other, size, 0);
	}
	if (!r) {
		dropped(cpu, ring);
		return 0;
	}
	r->type = type;
	r->tgid = pid_tgid >> 32;
	r->tid = (__u32)pid_tgid;
	r->nfds = 0;
	r->ktime = bpf_ktime_get_ns();
	r->ret = 0;
	r->arg[0] = r->arg[1] = r->arg[2] = 0;
	r->file = 0;
	return r;
}

/* records never wake the reader, which collects them every 25 ms (a wake-up per record would be
 * most of the tracer's CPU; the buffer holds seconds of records), except a refused pidfd call:
 * its cause is read from /proc at once, while both processes live */
static __always_inline void submit(void *r, bool now)
{
	bpf_ringbuf_submit(r, now ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* i & (MAXFDS - 1), in a form the compiler cannot fold away (the verifier needs to see it) */
static __always_inline __u64 slot(__u64 i)
{
	asm volatile("%0 &= 15" : "+r"(i));
	return i;
}

/* the struct file an fd of the current process names (0 when none); btf: every pointer loaded
 * directly (tp_btf: the slot of the fd array read through a one-pointer kernel type, no helper),
 * else by probe reads (raw_tp, kprobes) */
static __always_inline __u64 fd_file(int fd, bool btf)
{
	struct fdtable *fdt;
	unsigned int max;
	struct file **arr;
	if (btf) {
		struct task_struct *t = bpf_get_current_task_btf();
		fdt = t->files->fdt;
		max = fdt->max_fds;
		arr = fdt->fd;
	} else {
		struct task_struct *t = (struct task_struct *)bpf_get_current_task();
		fdt = BPF_CORE_READ(t, files, fdt);
		max = BPF_CORE_READ(fdt, max_fds);
		arr = BPF_CORE_READ(fdt, fd);
	}
	if (fd < 0 || (unsigned int)fd >= max)
		return 0;
	if (btf) /* struct hlist_head is { first }: one pointer, as arr[fd] is */
		return (__u64)CAST(&arr[fd], hlist_head)->first;
	struct file *f = 0;
	bpf_probe_read_kernel(&f, sizeof(f), &arr[fd]);
	return (__u64)f;
}

/* what an open file is, for FdsSent.kinds: its superblock's magic << 32 | its device's major
 * << 16 | its i_mode (userspace names memfd, socket, pidfd, dma-buf, /dev/nvidia*) */
static __always_inline __u64 file_kind(__u64 file, bool btf)
{
	if (!file)
		return 0;
	__u32 magic, major;
	__u16 mode;
	if (btf) {
		struct inode *ino = CAST(file, file)->f_inode;
		magic = ino->i_sb->s_magic;
		major = ino->i_rdev >> 20;
		mode = ino->i_mode;
	} else {
		struct inode *ino = BPF_CORE_READ((struct file *)file, f_inode);
		magic = BPF_CORE_READ(ino, i_sb, s_magic);
		major = BPF_CORE_READ(ino, i_rdev) >> 20;
		mode = BPF_CORE_READ(ino, i_mode);
	}
	return ((__u64)magic << 32) | ((major & 0xffff) << 16) | mode;
}

/* the socket an fd names, and its peer's: inodes, struct socks, family, bound name */
static __always_inline void read_socket(struct rec_msg *m, int sockfd, bool btf)
{
	m->sock_ino = m->peer_ino = m->sk = m->peer_sk = 0;
	m->family = m->namelen = 0;
	__u64 file = fd_file(sockfd, btf);
	if (!file)
		return;
	struct unix_address *addr;
	if (btf) {
		struct file *f = CAST(file, file);
		m->sock_ino = f->f_inode->i_ino;
		struct sock *sk = CAST(f->private_data, socket)->sk;
		if (!sk)
			return;
		m->sk = (__u64)sk;
		m->family = sk->__sk_common.skc_family;
		if (m->family != AF_UNIX)
			return;
		struct unix_sock *us = CAST(sk, unix_sock);
		struct sock *peer = us->peer;
		m->peer_sk = (__u64)peer; /* before accept() the peer has no socket (inode 0) */
		addr = us->addr;
		if (peer) {
			m->peer_ino = peer->sk_socket->file->f_inode->i_ino;
			if (!addr)
				addr = CAST(peer, unix_sock)->addr;
		}
	} else {
		struct file *f = (struct file *)file;
		m->sock_ino = BPF_CORE_READ(f, f_inode, i_ino);
		struct socket *so = BPF_CORE_READ(f, private_data);
		struct sock *sk = BPF_CORE_READ(so, sk);
		if (!sk)
			return;
		m->sk = (__u64)sk;
		m->family = BPF_CORE_READ(sk, __sk_common.skc_family);
		if (m->family != AF_UNIX)
			return;
		struct unix_sock *us = (struct unix_sock *)sk;
		struct sock *peer = BPF_CORE_READ(us, peer);
		m->peer_sk = (__u64)peer;
		if (peer)
			m->peer_ino = BPF_CORE_READ(peer, sk_socket, file, f_inode, i_ino);
		addr = BPF_CORE_READ(us, addr);
		if (!addr && peer)
			addr = BPF_CORE_READ((struct unix_sock *)peer, addr);
	}
	if (!addr)
		return;
	int len = btf ? CAST(addr, unix_address)->len : BPF_CORE_READ(addr, len);
	if (len <= 0)
		return;
	if (len > 110)
		len = 110;
	__u64 n = len;
	asm volatile("%0 &= 127" : "+r"(n));
	if (n > SUNLEN)
		return;
	m->namelen = n;
	bpf_probe_read_kernel(m->name, n, &addr->name);
}

/* fd i of a message's head record: the file it names (now followed: watched) and, for a send,
 * what that file is. Global functions: verified once, not once for each of the 16 fds */
static __always_inline void msg_fd(struct rec_msg *m, __u64 i, bool send, bool btf)
{
	i = slot(i);
	__u64 f = fd_file(m->fds[i], btf);
	m->files[i] = f;
	watch_file(f);
	if (send)
		m->kinds[i] = file_kind(f, btf);
}

__attribute__((noinline)) int msg_fd_btf(struct rec_msg *m, __u64 i, __u64 send)
{
	if (m)
		msg_fd(m, i, send, true);
	return 0;
}

__attribute__((noinline)) int msg_fd_raw(struct rec_msg *m, __u64 i, __u64 send)
{
	if (m)
		msg_fd(m, i, send, false);
	return 0;
}

/* fds [first, first + 16) of a message (user array at `fds`) in an EV_FDS record: verified once
 * (a global function), called for each chunk past the head's */
__attribute__((noinline)) int more_fds(__u64 fds, __u64 first_total, __u64 ktime, __u64 nr)
{
	__u32 first = first_total >> 32, total = (__u32)first_total;
	if (first >= total || total > SCM_MAX_FD)
		return 0;
	struct rec_fds *r = reserve(sizeof(*r), EV_FDS, bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	r->h.ktime = ktime;
	r->h.arg[0] = first;
	r->h.arg[1] = total;
	r->h.arg[2] = nr;
	bool send = nr == NR_sendmsg || nr == NR_sendmmsg;
	__u32 n = 0;
	for (int j = 0; j < MAXFDS; j++) {
		r->fds[j] = -1;
		r->files[j] = 0;
		r->kinds[j] = 0;
	}
	for (int j = 0; j < MAXFDS; j++) {
		if (first + j >= total)
			break;
		__s32 fd = -1;
		if (bpf_probe_read_user(&fd, 4, (void *)(fds + (first + j) * 4)))
			break;
		r->fds[j] = fd;
		r->files[j] = fd_file(fd, false);
		watch_file(r->files[j]);
		if (send)
			r->kinds[j] = file_kind(r->files[j], false);
		n = j + 1;
	}
	r->h.nfds = n;
	submit(r, false);
	return n;
}

/* a msghdr's control buffer and its length */
struct ctl {
	__u64 control;
	__u64 controllen;
};

/* the SCM_RIGHTS of one user msghdr (at `msg`; a receive's control length is what the kernel
 * wrote): a head record per SCM_RIGHTS cmsg with its first 16 fds (the cmsg's header and those
 * fds in one read), then EV_FDS records for the rest. Read at exit, as the call returns (a call
 * that blocked since before the trace began is seen too): a send's fds are still in the
 * sender's table, a receive's were installed by the kernel. */
static __always_inline void read_rights(__u64 msg, __u64 type_nr, int sockfd, long ret, bool btf)
{
	__u32 type = type_nr >> 32, nr = (__u32)type_nr;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct ctl mh = {};
	if (bpf_probe_read_user(&mh, sizeof(mh), (void *)(msg + 32)) || !mh.control ||
	    mh.controllen < 16)
		return;
	__u64 off = 0;
	for (int c = 0; c < MAXCMSGS; c++) {
		if (off + 16 > mh.controllen)
			break;
		struct {
			__u64 len;
			__s32 level;
			__s32 type;
			__s32 fd[MAXFDS];
		} h = {};
		__u64 size = mh.controllen - off;
		if (size > sizeof(h))
			size = sizeof(h);
		asm volatile("%0 &= 127" : "+r"(size));
		if (size < 16 || size > sizeof(h) ||
		    bpf_probe_read_user(&h, size, (void *)(mh.control + off)))
			break;
		if (h.len < 16 || off + h.len > mh.controllen)
			break;
		if (h.level == SOL_SOCKET && h.type == SCM_RIGHTS) {
			__u64 total = (h.len - 16) / 4;
			if (total > SCM_MAX_FD)
				total = SCM_MAX_FD;
			__u64 fds = mh.control + off + 16;
			struct rec_msg *m = reserve(sizeof(*m), type, pid_tgid);
			if (!m)
				return;
			m->h.ret = ret;
			m->h.arg[0] = sockfd;
			m->h.arg[1] = total;
			m->h.arg[2] = nr;
			read_socket(m, sockfd, btf);
			/* the head's fds came with the header: 16 + 4 * n <= h.len, and <= size */
			__u64 n = total < MAXFDS ? total : MAXFDS;
			for (int j = 0; j < MAXFDS; j++) {
				__u64 i = slot(j);
				m->fds[i] = -1;
				m->files[i] = 0;
				m->kinds[i] = 0;
				if (j >= n)
					continue;
				m->fds[i] = h.fd[i];
				if (btf)
					msg_fd_btf(m, i, type == EV_SEND);
				else
					msg_fd_raw(m, i, type == EV_SEND);
			}
			m->h.nfds = n;
			__u64 ktime = m->h.ktime;
			submit(m, false);
			for (int k = 1; k < MAXCHUNKS; k++) {
				if (k * MAXFDS >= total)
					break;
				more_fds(fds, ((__u64)(k * MAXFDS) << 32) | total, ktime, nr);
			}
		}
		off += (h.len + 7) & ~7ULL;
	}
}

/* verified once each (global functions), however many messages a call carries; fd_ret: the
 * socket fd << 32 | the result (32 bits, sign-extended back) */
__attribute__((noinline)) int rights_btf(__u64 msg, __u64 type_nr, __u64 sockfd, __u64 ret)
{
	read_rights(msg, type_nr, (int)sockfd, (long)ret, true);
	return 0;
}

__attribute__((noinline)) int rights_raw(__u64 msg, __u64 type_nr, __u64 sockfd, __u64 ret)
{
	read_rights(msg, type_nr, (int)sockfd, (long)ret, false);
	return 0;
}

static __always_inline void rights(__u64 msg, __u32 type, long id, int sockfd, long ret, bool btf)
{
	__u64 type_nr = ((__u64)type << 32) | (__u32)id;
	if (btf)
		rights_btf(msg, type_nr, sockfd, ret);
	else
		rights_raw(msg, type_nr, sockfd, ret);
}

/* the facts of one task for a ptrace check; every read a probe read (tp_btf and raw_tp alike) */
static __always_inline void read_side(struct side *s, struct task_struct *t)
{
	s->pid = BPF_CORE_READ(t, tgid);
	const struct cred *c = BPF_CORE_READ(t, cred);
	s->uid = BPF_CORE_READ(c, uid.val);
	s->euid = BPF_CORE_READ(c, euid.val);
	s->suid = BPF_CORE_READ(c, suid.val);
	s->gid = BPF_CORE_READ(c, gid.val);
	s->egid = BPF_CORE_READ(c, egid.val);
	s->sgid = BPF_CORE_READ(c, sgid.val);
	s->cap_eff = BPF_CORE_READ(c, cap_effective.val);
	s->cap_prm = BPF_CORE_READ(c, cap_permitted.val);
	s->userns = BPF_CORE_READ(c, user_ns, ns.inum);
	s->seccomp = BPF_CORE_READ(t, seccomp.mode);
	s->filters = bpf_core_field_exists(t->seccomp.filter_count)
			     ? BPF_CORE_READ(t, seccomp.filter_count.counter)
			     : -1;
	/* the active PID namespace: numbers[level] of the task's pid */
	struct pid *p = BPF_CORE_READ(t, thread_pid);
	if (p) {
		unsigned int level = BPF_CORE_READ(p, level) & 31;
		struct upid up = {};
		bpf_probe_read_kernel(&up, sizeof(up),
				      (void *)p + bpf_core_field_offset(struct pid, numbers) +
					      level * bpf_core_type_size(struct upid));
		s->pidns = BPF_CORE_READ(up.ns, ns.inum);
	}
	void *mm = BPF_CORE_READ(t, mm);
	s->dumpable = -1;
	if (mm) {
		unsigned long flags;
		if (bpf_core_field_exists(((struct mm_struct___bitmap *)mm)->flags.__mm_flags))
			flags = BPF_CORE_READ((struct mm_struct___bitmap *)mm, flags.__mm_flags[0]);
		else
			flags = BPF_CORE_READ((struct mm_struct___long *)mm, flags);
		s->dumpable = flags & 3;
	}
	bpf_probe_read_kernel_str(s->comm, sizeof(s->comm), &t->comm);
}

/* a refused pidfd_getfd: both processes' facts, now, before the caller can exit (userspace reads
 * /proc only for what the kernel record lacks) */
static __always_inline void refusal(__u64 pid_tgid, int pidfd, bool btf)
{
	struct rec_refusal *r = reserve(sizeof(*r), EV_REFUSAL, pid_tgid);
	if (!r)
		return;
	__builtin_memset(&r->caller, 0, sizeof(r->caller));
	__builtin_memset(&r->target, 0, sizeof(r->target));
	read_side(&r->caller, (struct task_struct *)bpf_get_current_task());
	struct file *pf = (struct file *)fd_file(pidfd, btf);
	if (pf) {
		struct pid *p = BPF_CORE_READ(pf, f_inode, i_private);
		if (!p)
			p = BPF_CORE_READ(pf, private_data);
		/* the thread group's leader: tasks[PIDTYPE_TGID], linked by its pid_links[1] */
		struct hlist_node *first = BPF_CORE_READ(p, tasks[1].first);
		if (first)
			read_side(&r->target,
				  (void *)first - bpf_core_field_offset(struct task_struct, pid_links) -
					  sizeof(struct hlist_node));
	}
	submit(r, false);
}

#define REG(regs, f) (btf ? (regs)->f : BPF_CORE_READ(regs, f))

/* the syscalls the trace records; every other one ends here, at enter and at exit */
static __always_inline bool wanted(long id)
{
	switch (id) {
	case NR_close:
	case NR_sendmsg:
	case NR_recvmsg:
	case NR_sendmmsg:
	case NR_recvmmsg:
	case NR_close_range:
	case NR_dup:
	case NR_dup2:
	case NR_dup3:
	case NR_fcntl:
	case NR_memfd_create:
	case NR_pidfd_open:
	case NR_pidfd_getfd:
		return true;
	}
	return false;
}

/* the calls sys_enter decides on: a close or dup matters only for a watched file, and the file
 * an fd named is gone from the table at exit. The rest are read at exit alone, as they return:
 * a message's control buffer costs one read there as at enter, and a send or receive that
 * blocked since before the trace (or this process's following) began is seen too. */
static __always_inline bool decided_at_enter(long id)
{
	switch (id) {
	case NR_close:
	case NR_dup:
	case NR_dup2:
	case NR_dup3:
	case NR_fcntl:
		return true;
	}
	return false;
}

/* sys_enter decides: the syscall number, then the tracked-process bit, then the file (a close
 * or dup of a file not watched, a fcntl that is no dup: nothing). What is left is stashed for
 * sys_exit, which then only finds it. */
static __always_inline int on_enter(struct pt_regs *regs, long id, bool btf)
{
	if (!decided_at_enter(id))
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!is_traced(pid_tgid >> 32))
		return 0;
	struct pending p = {.nr = id};
	p.a0 = REG(regs, di);
	switch (id) {
	case NR_fcntl: {
		long cmd = REG(regs, si);
		if (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)
			return 0;
	}
		/* fall through */
	case NR_close:
	case NR_dup:
	case NR_dup2:
	case NR_dup3:
		/* only the files the trace follows: their close, their dups (the new fd names the
		 * same file) */
		p.file = fd_file((int)p.a0, btf);
		if (!is_watched(p.file))
			return 0;
		break;
	}
	if (btf) {
		struct pending *slot = bpf_task_storage_get(
			&pending_task, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (slot)
			*slot = p;
		return 0;
	}
	__u32 tid = (__u32)pid_tgid;
	bpf_map_update_elem(&pending_tid, &tid, &p, BPF_ANY);
	return 0;
}

static __always_inline int on_exit(struct pt_regs *regs, long ret, bool btf)
{
	long id;
	__u64 pid_tgid;
	if (btf) { /* the syscall number first: a load, no helper */
		id = regs->orig_ax;
		if (!wanted(id))
			return 0;
		pid_tgid = bpf_get_current_pid_tgid();
		if (!is_traced(pid_tgid >> 32))
			return 0;
	} else { /* the tgid first: reading the number is a probe read */
		pid_tgid = bpf_get_current_pid_tgid();
		if (!is_traced(pid_tgid >> 32))
			return 0;
		id = BPF_CORE_READ(regs, orig_ax);
		if (!wanted(id))
			return 0;
	}
	/* the arguments are still in the saved user registers */
	__u64 a0 = REG(regs, di), a1 = REG(regs, si);
	__u64 file = 0;
	if (decided_at_enter(id)) {
		__u32 tid = (__u32)pid_tgid;
		struct pending *slot =
			btf ? bpf_task_storage_get(&pending_task, bpf_get_current_task_btf(), 0, 0)
			    : bpf_map_lookup_elem(&pending_tid, &tid);
		if (!slot || slot->nr != id || slot->a0 != a0)
			return 0; /* decided at enter: nothing to record */
		file = slot->file;
		if (btf)
			slot->nr = 0;
		else
			bpf_map_delete_elem(&pending_tid, &tid);
	}
	__u32 tgid = pid_tgid >> 32;
	switch (id) {
	case NR_close: {
		struct rec *r = reserve(sizeof(*r), EV_CLOSE, pid_tgid);
		if (r) {
			r->ret = ret;
			r->arg[0] = (int)a0;
			r->file = file;
			submit(r, false);
		}
		count(tgid, EV_CLOSE);
		return 0;
	}
	case NR_sendmsg:
	case NR_recvmsg: {
		__u32 type = id == NR_sendmsg ? EV_SEND : EV_RECV;
		if (type == EV_RECV && ret < 0)
			return 0;
		rights(a1, type, id, (int)a0, ret, btf);
		count(tgid, type);
		return 0;
	}
	case NR_sendmmsg:
	case NR_recvmmsg: {
		__u32 type = id == NR_sendmmsg ? EV_SEND : EV_RECV;
		if (type == EV_RECV && ret < 0)
			return 0;
		__u64 vec = a1, vlen = REG(regs, dx);
		int sockfd = (int)a0;
		/* the messages that went (a refused call: the first, with the error) */
		__u64 n = ret > 0 ? (__u64)ret : 1;
		if (n > vlen)
			n = vlen;
		for (int m = 0; m < MAXMSGS; m++) {
			if (m >= n)
				break;
			rights(vec + m * 64, type, id, sockfd, ret, btf);
		}
		count(tgid, type);
		return 0;
	}
	case NR_close_range: {
		struct rec *r = reserve(sizeof(*r), EV_CLOSE_RANGE, pid_tgid);
		if (r) {
			r->ret = ret;
			r->arg[0] = (__u32)a0;
			r->arg[1] = (__u32)a1;
			submit(r, false);
		}
		count(tgid, EV_CLOSE_RANGE);
		return 0;
	}
	case NR_fcntl:
	case NR_dup:
	case NR_dup2:
	case NR_dup3: {
		if (ret < 0) /* a refused dup of a watched fd: the old fd still names the file */
			return 0;
		struct rec *r = reserve(sizeof(*r), EV_DUP, pid_tgid);
		if (r) {
			r->ret = ret;
			r->arg[0] = (int)a0;
			r->arg[2] = id;
			r->file = file; /* the new fd names the old one's file */
			submit(r, false);
		}
		count(tgid, EV_DUP);
		return 0;
	}
	case NR_memfd_create: {
		struct rec_named *r = reserve(sizeof(*r), EV_MEMFD, pid_tgid);
		if (!r)
			return 0;
		r->h.ret = ret;
		if (ret >= 0) {
			r->h.file = fd_file((int)ret, btf);
			watch_file(r->h.file);
		}
		__builtin_memset(r->comm, 0, sizeof(r->comm));
		/* the name as the kernel keeps it: the new file's dentry is "memfd:" and the name
		 * asked (a kernel read, cheaper than the user string), else the string asked */
		const unsigned char *kname = 0;
		if (btf && r->h.file)
			kname = CAST(r->h.file, file)->f_path.dentry->d_name.name;
		if (kname ? bpf_probe_read_kernel_str(r->name, NAMELEN, kname + 6) < 0
			  : bpf_probe_read_user_str(r->name, NAMELEN, (void *)a0) < 0)
			r->name[0] = 0;
		submit(r, false);
		count(tgid, EV_MEMFD);
		return 0;
	}
	case NR_pidfd_open: {
		struct rec *r = reserve(sizeof(*r), EV_PIDFD_OPEN, pid_tgid);
		if (r) {
			r->ret = ret;
			r->arg[0] = (int)a0;
			if (ret >= 0) {
				r->file = fd_file((int)ret, btf);
				watch_file(r->file);
			}
			/* a refused pidfd call at once: its cause is read from /proc while both live */
			submit(r, ret < 0);
		}
		count(tgid, EV_PIDFD_OPEN);
		return 0;
	}
	case NR_pidfd_getfd: {
		int pidfd = (int)a0;
		if (ret < 0)
			refusal(pid_tgid, pidfd, btf);
		struct rec *r = reserve(sizeof(*r), EV_PIDFD_GETFD, pid_tgid);
		if (!r)
			return 0;
		r->ret = ret;
		r->arg[0] = pidfd;
		r->arg[1] = (int)a1;
		struct file *pf = (struct file *)fd_file(pidfd, btf);
		if (pf) { /* pidfs keeps the struct pid in the inode (6.9+), older kernels in the file */
			struct pid *pp = BPF_CORE_READ(pf, f_inode, i_private);
			if (!pp)
				pp = BPF_CORE_READ(pf, private_data);
			r->arg[2] = BPF_CORE_READ(pp, numbers[0].nr);
		}
		if (ret >= 0) {
			r->file = fd_file((int)ret, btf);
			watch_file(r->file);
		}
		submit(r, ret < 0);
		count(tgid, EV_PIDFD_GETFD);
		return 0;
	}
	}
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	return on_enter(regs, id, true);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	return on_exit(regs, ret, true);
}

/* the fallback where the kernel refuses tp_btf: the same, with probe reads */
SEC("raw_tp/sys_enter")
int BPF_PROG(raw_sys_enter, struct pt_regs *regs, long id)
{
	return on_enter(regs, id, false);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(raw_sys_exit, struct pt_regs *regs, long ret)
{
	return on_exit(regs, ret, false);
}

static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 cpid = BPF_CORE_READ(child, pid), ctgid = BPF_CORE_READ(child, tgid);
	if (cpid != ctgid || !is_traced(ptgid))
		return 0;
	set_traced(ctgid, true);
	struct rec_named *r = reserve(sizeof(*r), EV_FORK, bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	r->h.tgid = ptgid;
	r->h.arg[0] = ctgid;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	r->name[0] = 0;
	submit(r, false);
	return 0;
}

static __always_inline int on_exec(struct task_struct *p, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!is_traced(tgid))
		return 0;
	struct rec_named *r = reserve(sizeof(*r), EV_EXEC, bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	const char *fn = BPF_CORE_READ(bprm, filename);
	if (bpf_probe_read_kernel_str(r->name, NAMELEN, fn) < 0)
		r->name[0] = 0;
	submit(r, false);
	return 0;
}

static __always_inline int on_exit_process(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!is_traced(tgid))
		return 0;
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0; /* not the last thread */
	struct rec_named *r = reserve(sizeof(*r), EV_EXIT, bpf_get_current_pid_tgid());
	if (r) {
		r->h.ret = BPF_CORE_READ(p, exit_code);
		bpf_get_current_comm(r->comm, sizeof(r->comm));
		r->name[0] = 0;
		submit(r, false);
	}
	set_traced(tgid, false);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(proc_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	return on_exec(p, bprm);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(proc_exit, struct task_struct *p)
{
	return on_exit_process(p);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(raw_proc_fork, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(raw_proc_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	return on_exec(p, bprm);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(raw_proc_exit, struct task_struct *p)
{
	return on_exit_process(p);
}

/* is_watched as a global function: verified once, its answer a number for the caller (no path
 * for each answer of each of 16 fds) */
__attribute__((noinline)) int file_watched(__u64 f)
{
	return is_watched(f);
}

/* the fds of one discarded message (its scm_fp_list) from index `first`, in one EV_QUEUED or
 * EV_DROPPED record (type_any: the type << 32 | --all); only files the trace follows are reported
 * (a discard elsewhere on the machine says nothing), or every one under --all. `sk` is the
 * socket's struct sock, `extra` goes to h.ret. */
__attribute__((noinline)) int fp_chunk(__u64 fpl, __u64 first_total, __u64 ino, __u64 sk,
				       __u64 type_extra_any)
{
	__u32 first = first_total >> 32, total = (__u32)first_total;
	__u32 type = type_extra_any >> 32, extra = (__u32)type_extra_any >> 1;
	bool any = type_extra_any & 1;
	if (first >= total || total > SCM_MAX_FD)
		return 0;
	__u64 files[MAXFDS] = {};
	__u32 n = 0, watched_here = 0;
	struct scm_fp_list *fp = (struct scm_fp_list *)fpl;
	for (int j = 0; j < MAXFDS; j++) {
		__u32 i = first + j;
		if (i >= total || i >= SCM_MAX_FD)
			break;
		__u64 f = 0;
		bpf_probe_read_kernel(&f, 8, &fp->fp[i]);
		files[j] = f;
		watched_here |= file_watched(f);
		n = j + 1;
	}
	if (!watched_here && !any)
		return 0;
	struct rec_fds *r = reserve(sizeof(*r), type, bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	r->h.nfds = n;
	r->h.ret = extra;
	r->h.arg[0] = ino;
	r->h.arg[1] = total;
	r->h.arg[2] = first;
	r->h.file = sk;
	for (int j = 0; j < MAXFDS; j++) {
		r->fds[j] = -1;
		r->files[j] = files[j];
		r->kinds[j] = 0;
	}
	submit(r, false);
	return n;
}

static __always_inline void fp_records(struct scm_fp_list *fp, __u64 ino, __u64 sk, __u32 type,
				       __u32 extra)
{
	__u32 total = BPF_CORE_READ(fp, count);
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&config, &zero);
	__u64 tea = ((__u64)type << 32) | ((extra & 0x7fffffff) << 1) | (c && c->everything);
	for (int k = 0; k < MAXCHUNKS; k++) {
		if (k * MAXFDS >= total)
			break;
		fp_chunk((__u64)fp, ((__u64)(k * MAXFDS) << 32) | total, ino, sk, tea);
	}
}

/* A Unix socket's message freed with its SCM_RIGHTS still attached: received messages had their
 * fds detached (UNIXCB(skb).fp = NULL) before they are freed, so these fds were sent and never
 * received: the socket holding them was released (close, exit) or collected with them queued.
 * kfree_skb fires before the skb's destructor (unix_destruct_scm) drops the files. */
static __always_inline int on_skb_freed(struct sk_buff *skb)
{
	struct sock *sk = BPF_CORE_READ(skb, sk);
	if (!sk || BPF_CORE_READ(sk, __sk_common.skc_family) != AF_UNIX)
		return 0;
	__u64 cb = (__u64)skb + bpf_core_field_offset(struct sk_buff, cb);
	struct scm_fp_list *fp = BPF_CORE_READ((struct unix_skb_parms *)cb, fp);
	if (!fp)
		return 0;
	/* the sending socket (the skb's owner), as the send's record names it */
	__u64 ino = BPF_CORE_READ(sk, sk_socket, file, f_inode, i_ino);
	fp_records(fp, ino, (__u64)sk, EV_QUEUED, 0);
	return 0;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(skb_freed, struct sk_buff *skb)
{
	return on_skb_freed(skb);
}

SEC("raw_tp/kfree_skb")
int BPF_PROG(raw_skb_freed, struct sk_buff *skb)
{
	return on_skb_freed(skb);
}

/* A receive that has no room for SCM_RIGHTS (read(), readv(), recvfrom(), recvmsg() without a
 * control buffer) takes the message's data and the kernel closes its fds. The copy of the data
 * comes first (skb_copy_datagram_iovec, for stream and datagram sockets alike), with the fds
 * still attached (UNIXCB(skb).fp): what the syscall asking for the data is tells whether they
 * are about to be installed (recvmsg with a control buffer: its record) or dropped (reported
 * here). MSG_PEEK leaves them queued. Any traced process's copy with fds is looked at, no other. */
#define MSG_PEEK 2
static __always_inline int on_copied(struct sk_buff *skb)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!is_traced(pid_tgid >> 32))
		return 0;
	/* a Unix socket's message: its owner is the sending socket, its cb UNIXCB */
	struct sock *owner = BPF_CORE_READ(skb, sk);
	if (!owner || BPF_CORE_READ(owner, __sk_common.skc_family) != AF_UNIX)
		return 0;
	__u64 cb = (__u64)skb + bpf_core_field_offset(struct sk_buff, cb);
	struct scm_fp_list *fp = BPF_CORE_READ((struct unix_skb_parms *)cb, fp);
	if (!fp)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	long nr = BPF_CORE_READ(regs, orig_ax);
	__u64 flags = 0;
	if (nr == NR_recvmsg) {
		__u64 msg = BPF_CORE_READ(regs, si), control = 0;
		bpf_probe_read_user(&control, 8, (void *)(msg + 32));
		if (control)
			return 0; /* installed (its record says so), or cut short: MSG_CTRUNC */
		flags = BPF_CORE_READ(regs, dx);
	} else if (nr == NR_recvfrom) {
		flags = BPF_CORE_READ(regs, r10);
	} else if (nr != NR_read && nr != NR_readv) {
		return 0;
	}
	if (flags & MSG_PEEK)
		return 0;
	int fd = BPF_CORE_READ(regs, di);
	struct file *f = (struct file *)fd_file(fd, false);
	__u64 ino = BPF_CORE_READ(f, f_inode, i_ino);
	struct socket *so = BPF_CORE_READ(f, private_data);
	__u64 sk = (__u64)BPF_CORE_READ(so, sk);
	fp_records(fp, ino, sk, EV_DROPPED, nr);
	return 0;
}

SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(fds_dropped, struct sk_buff *skb, int len)
{
	return on_copied(skb);
}

SEC("raw_tp/skb_copy_datagram_iovec")
int BPF_PROG(raw_fds_dropped, struct sk_buff *skb, int len)
{
	return on_copied(skb);
}

/* CUDA driver calls: userspace attaches these to each function with its index as the cookie */
#define CU_IPC_OPEN 8 /* index of cuIpcOpenMemHandle_v2 / cuIpcOpenMemHandle in FUNCS (trace/cuda.py) */
#define CU_IPC_OPEN_OLD 9
#define CU_MEM_CREATE 0
#define CU_EXPORT 1
#define CU_IMPORT 2 /* cuMemImportFromShareableHandle: the fd in arg 1 */
#define CU_SET_ACCESS 5
#define CU_POOL_CREATE 15 /* CUmemPoolProps *: allocType, handleTypes, location {type, id} */
#define CU_POOL_EXPORT 17 /* cuMemPoolExportToShareableHandle: fd out through arg 0 */
#define CU_POOL_IMPORT 18 /* cuMemPoolImportFromShareableHandle: the fd in arg 1 */
#define CU_POOL_IMPORT_PTR 20 /* CUmemPoolPtrExportData * (64 bytes) in arg 2 */

SEC("uprobe")
int cuda_enter(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (!is_traced(id >> 32))
		return 0;
	struct cuda_key k = {.tid = (__u32)id, .func = (__u32)bpf_get_attach_cookie(ctx)};
	struct cuda_args a = {};
	a.arg[0] = PT_REGS_PARM1(ctx);
	a.arg[1] = PT_REGS_PARM2(ctx);
	a.arg[2] = PT_REGS_PARM3(ctx);
	a.arg[3] = PT_REGS_PARM4(ctx);
	a.arg[4] = PT_REGS_PARM5(ctx);
	a.t0 = bpf_ktime_get_ns();
	if (k.func == CU_IPC_OPEN || k.func == CU_IPC_OPEN_OLD) /* CUipcMemHandle by value: on the stack */
		bpf_probe_read_user(a.ipc, 64, (void *)(PT_REGS_SP(ctx) + 8));
	if (k.func == CU_MEM_CREATE) /* prop: requestedHandleTypes at +4, location.id at +12 */
		bpf_probe_read_user(a.ipc, 16, (void *)a.arg[2]);
	if (k.func == CU_SET_ACCESS) /* desc[0]: location {type, id}, flags */
		bpf_probe_read_user(a.ipc, 12, (void *)a.arg[2]);
	if (k.func == CU_POOL_CREATE)
		bpf_probe_read_user(a.ipc, 16, (void *)a.arg[1]);
	if (k.func == CU_POOL_IMPORT_PTR)
		bpf_probe_read_user(a.ipc, 64, (void *)a.arg[2]);
	/* the open file an imported fd names, as the syscall records name files: an fd inherited
	 * across fork and exec is the exporter's own open file */
	if ((k.func == CU_IMPORT || k.func == CU_POOL_IMPORT) && a.arg[2] == 1 /* POSIX fd */)
		a.file = fd_file((int)a.arg[1], false);
	bpf_map_update_elem(&cuda_inflight, &k, &a, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int cuda_exit(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cuda_key k = {.tid = (__u32)id, .func = (__u32)bpf_get_attach_cookie(ctx)};
	struct cuda_args *a = bpf_map_lookup_elem(&cuda_inflight, &k);
	if (!a)
		return 0;
	struct rec_cuda *r = reserve(sizeof(*r), EV_CUDA, id);
	if (!r)
		goto done;
	r->h.ret = (__s32)PT_REGS_RC(ctx);
	r->dur = r->h.ktime - a->t0;
	r->h.ktime = a->t0;
	r->h.nfds = k.func;
	for (int i = 0; i < 5; i++)
		r->args[i] = a->arg[i];
	__builtin_memcpy(r->name, a->ipc, 64);
	__builtin_memset(r->name + 64, 0, 64);
	/* outputs: through the first argument's pointer (handle, fd, device address, IPC bytes) */
	if (a->arg[0])
		bpf_probe_read_user(&r->h.file, 8, (void *)a->arg[0]);
	if ((k.func == CU_EXPORT || k.func == CU_POOL_EXPORT) && r->h.ret == 0 &&
	    a->arg[2] == 1 /* POSIX fd */ && a->arg[0]) {
		__s32 fd = -1;
		bpf_probe_read_user(&fd, 4, (void *)a->arg[0]);
		r->h.arg[0] = fd_file(fd, false);
		watch_file(r->h.arg[0]);
	}
	if (k.func == CU_IMPORT || k.func == CU_POOL_IMPORT) {
		r->h.arg[0] = a->file;
		watch_file(a->file);
	}
	if (a->arg[0] && k.func != CU_IPC_OPEN && k.func != CU_IPC_OPEN_OLD &&
	    k.func != CU_MEM_CREATE && k.func != CU_SET_ACCESS && k.func != CU_POOL_CREATE &&
	    k.func != CU_POOL_IMPORT_PTR)
		bpf_probe_read_user(r->name + 64, 64, (void *)a->arg[0]);
	submit(r, false);
done:
	bpf_map_delete_elem(&cuda_inflight, &k);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
